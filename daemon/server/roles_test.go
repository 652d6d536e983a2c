package server

import (
	"testing"

	"github.com/termd/termd/daemon/config"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Each role has one word, and the API's enum value and the x-termd-role
// metadata a caller sends are read through it.
func TestRoleWordsMapToTheAPI(t *testing.T) {
	for r, want := range map[config.Role]termdv1.Role{
		config.RoleNone:     termdv1.Role_ROLE_UNSPECIFIED,
		config.RoleViewer:   termdv1.Role_ROLE_VIEWER,
		config.RoleAgent:    termdv1.Role_ROLE_AGENT,
		config.RoleOperator: termdv1.Role_ROLE_OPERATOR,
		config.Role(9):      termdv1.Role_ROLE_UNSPECIFIED,
	} {
		if got := roleProto(r); got != want {
			t.Errorf("roleProto(%s) = %s, want %s", r, got, want)
		}
	}
	for name, want := range map[string]config.Role{
		"viewer": config.RoleViewer, "AGENT": config.RoleAgent, "Operator": config.RoleOperator,
		"ROLE_VIEWER": config.RoleViewer, "role_agent": config.RoleAgent, termdv1.Role_ROLE_OPERATOR.String(): config.RoleOperator,
	} {
		if got, ok := config.RoleFromName(name); !ok || got != want {
			t.Errorf("config.RoleFromName(%q) = %s, %v; want %s", name, got, ok, want)
		}
	}
	for _, name := range []string{"", "none", "ROLE_NONE", "ROLE_UNSPECIFIED", "root", "ROLE_ROLE_AGENT", "operators"} {
		if got, ok := config.RoleFromName(name); ok {
			t.Errorf("config.RoleFromName(%q) = %s, want refused", name, got)
		}
	}
}
