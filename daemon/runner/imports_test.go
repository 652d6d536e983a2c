//go:build linux

package runner

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The runner and its parts import what their package docs say they may:
// cgroup and proctree no termd package, pool only cgroup, proctree and the
// launcher protocol (never the runner: what it needs of it comes in as
// functions), and the runner only its parts and the launcher protocol.
func TestPartsImportWhatTheyMay(t *testing.T) {
	const module = "github.com/termd/termd/"
	may := map[string][]string{
		"daemon/runner":          {"daemon/runner/cgroup", "daemon/runner/pool", "daemon/runner/proctree", "daemon/sandbox/launcher"},
		"daemon/runner/cgroup":   nil,
		"daemon/runner/pool":     {"daemon/runner/cgroup", "daemon/runner/proctree", "daemon/sandbox/launcher"},
		"daemon/runner/proctree": nil,
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(f[0], module)
		allowed, ok := may[pkg]
		if !ok {
			t.Errorf("package %s has no import rule here: add one (and a Layout row in docs/ARCHITECTURE.md)", pkg)
			continue
		}
		seen[pkg] = true
		for _, imp := range f[1:] {
			if rel, ours := strings.CutPrefix(imp, module); ours && !slices.Contains(allowed, rel) {
				t.Errorf("%s imports %s; it may import only %v of termd", pkg, rel, allowed)
			}
		}
	}
	for pkg := range may {
		if !seen[pkg] {
			t.Errorf("package %s is missing", pkg)
		}
	}
}
