package sandbox

import (
	"strings"
	"testing"

	"github.com/termd/termd/daemon/domain"
)

func TestSeatbeltProfile(t *testing.T) {
	ps := Paths{
		Workspaces:     []string{"/Users/a/proj"},
		SystemRead:     []string{"/usr", "/etc"},
		Home:           "/var/termd-home/501",
		Tmp:            "/var/termd-home/.tmp/x1",
		Cwd:            "/Users/a/proj/sub",
		Hidden:         []string{"/Users/a/proj/.run", `/odd "quoted\\path`},
		ProtectedNames: []string{".envrc"},
		ProtectedDirs:  []string{".vscode"},
	}
	ro := SeatbeltProfile(domain.Profile{Profile: domain.ReadOnly, Exec: []string{"/bin/ls"}}, ps)
	ww := SeatbeltProfile(domain.Profile{Profile: domain.WorkspaceWrite}, ps)
	net := SeatbeltProfile(domain.Profile{Profile: domain.WorkspaceWrite, Network: true}, ps)
	for _, want := range []string{"(deny default)", `(allow file-read* (subpath "/Users/a/proj"))`, `(allow process-exec (literal "/bin/ls"))`,
		`(allow file-read* file-write* (subpath "/var/termd-home/.tmp/x1"))`} {
		if !strings.Contains(ro, want) {
			t.Errorf("read-only profile lacks %s:\n%s", want, ro)
		}
	}
	for _, bad := range []string{`(allow file-write* (subpath "/Users/a/proj"))`, "(allow network*)", `(allow process-exec (subpath "/usr")`} {
		if strings.Contains(ro, bad) {
			t.Errorf("read-only profile has %s", bad)
		}
	}
	for _, want := range []string{`(allow file-write* (subpath "/Users/a/proj"))`, `(allow process-exec (subpath "/usr")`,
		`(subpath "/Users/a/proj/sub/.vscode")`, `(subpath "/Users/a/proj/.git/hooks")`, `(subpath "/Users/a/proj/.termd")`} {
		if !strings.Contains(ww, want) {
			t.Errorf("workspace-write profile lacks %s:\n%s", want, ww)
		}
	}
	// Last matching rule wins in Seatbelt: the denials come after the grants.
	if strings.Index(ww, "(deny file-write*") < strings.Index(ww, `(allow file-write* (subpath "/Users/a/proj"))`) {
		t.Error("protected paths are denied before the workspace is granted, so the grant would win")
	}
	hide := strings.Index(ww, `(deny file-read* file-write* process-exec (subpath "/Users/a/proj/.run")`)
	if hide < 0 || hide < strings.Index(ww, `(allow file-read* (subpath "/Users/a/proj"))`) {
		t.Errorf("termd's files are not denied after the workspace grant:\n%s", ww)
	}
	if !strings.Contains(ww, `(subpath "/odd \"quoted\\\\path")`) {
		t.Errorf("quotes and backslashes are not escaped:\n%s", ww)
	}
	if strings.Contains(ww, "(allow network*)") || !strings.Contains(net, "(allow network*)") {
		t.Error("network is granted exactly when the profile has it")
	}
}
