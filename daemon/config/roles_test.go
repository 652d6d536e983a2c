package config

import "testing"

// A role's word reads back as the role; none and other words name no role.
func TestRoleWords(t *testing.T) {
	for r, w := range map[Role]string{RoleNone: "none", RoleViewer: "viewer", RoleAgent: "agent", RoleOperator: "operator", Role(-1): "none", Role(4): "none"} {
		if r.String() != w {
			t.Errorf("Role(%d).String() = %q, want %q", int(r), r.String(), w)
		}
	}
	for _, r := range []Role{RoleViewer, RoleAgent, RoleOperator} {
		if got, ok := RoleNamed(r.String()); !ok || got != r {
			t.Errorf("RoleNamed(%q) = %v, %v", r.String(), got, ok)
		}
		if got := (TLSClient{Role: r.String()}).RoleValue(); got != r {
			t.Errorf("listen_tls client role %q = %v", r.String(), got)
		}
	}
	for _, w := range []string{"none", "", "Operator", "admin"} {
		if got, ok := RoleNamed(w); ok || got != RoleNone {
			t.Errorf("RoleNamed(%q) = %v, %v; want none, false", w, got, ok)
		}
	}
}
