package executions_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/termd/termd/daemon/broker/executions"
	"github.com/termd/termd/daemon/config"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// A caller may ask for the credentials open to anyone, to its role, or to
// its uid; a certificate's principal only for those open to anyone or its
// role. The listing shows an operator every credential with its source, an
// agent what it may ask for without where it lives, a viewer nothing.
func TestCredentialScopesAndListing(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ci-token")
	if err := os.WriteFile(file, []byte("ci-token-5e0b1f7a"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Credentials = []config.Credential{
		{Name: "OPEN", File: file, Programs: []string{"gh"}},
		{Name: "OPS", File: file, Principals: config.CredentialPrincipals{Roles: []string{"operator"}}},
		{Name: "MINE", File: filepath.Join(dir, "missing"), Principals: config.CredentialPrincipals{UIDs: []uint32{65534}}},
	}
	operator := &termdv1.Principal{Uid: 0, Name: "root", Role: termdv1.Role_ROLE_OPERATOR}
	cert := &termdv1.Principal{Uid: 65534, Name: "cert:ci", Role: termdv1.Role_ROLE_AGENT, Cert: "ci"}
	viewer := &termdv1.Principal{Uid: 4242, Name: "viewer", Role: termdv1.Role_ROLE_VIEWER}
	for _, c := range []struct {
		who  *termdv1.Principal
		want []string
	}{{operator, []string{"OPEN", "OPS"}}, {agent, []string{"MINE", "OPEN"}}, {cert, []string{"OPEN"}}, {viewer, []string{"OPEN"}}} {
		var got []string
		for name := range executions.CredentialScopes(cfg, c.who) {
			got = append(got, name)
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s may ask for %v, want %v", c.who.Name, got, c.want)
		}
	}
	if s := executions.CredentialScopes(cfg, agent)["OPEN"]; !slices.Equal(s.Programs, []string{"gh"}) {
		t.Errorf("OPEN's programs %v", s.Programs)
	}
	ops := executions.ListCredentials(cfg, operator)
	if len(ops) != 3 || ops[0].Path != file || ops[0].Source != "file" || ops[0].Inject != "env" || !ops[0].Readable || ops[2].Readable || ops[2].Problem == "" {
		t.Errorf("the operator's listing: %v", ops)
	}
	mine := executions.ListCredentials(cfg, agent)
	if len(mine) != 2 || mine[0].Name != "OPEN" || mine[1].Name != "MINE" {
		t.Fatalf("the agent's listing: %v", mine)
	}
	for _, info := range mine {
		if info.Source != "" || info.Path != "" || info.Principals != nil {
			t.Errorf("the agent learns where %s lives or who else may have it: %v", info.Name, info)
		}
	}
	if mine[1].Readable || mine[1].Problem != "its source cannot be read now; an operator sees why in `termctl credentials`" {
		t.Errorf("an unreadable credential, to the agent: %v", mine[1])
	}
	if v := executions.ListCredentials(cfg, viewer); len(v) != 0 {
		t.Errorf("a viewer's listing: %v", v)
	}
}
