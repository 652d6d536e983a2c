package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
)

// Everyday read-only tools run; a project's scripts, run by path or by their
// interpreter, are project code instead of being refused: without a fully
// enforced sandbox they ask (and run once approved); with one they run
// inside it (read-only, no network) without approval.
func TestEverydayToolsRunAndProjectScriptsAsk(t *testing.T) {
	// Without the sandbox, project code asks in confirm mode.
	d := harness.Start(t, harness.Options{Config: "sandbox: \"off\"\n"})
	checkProjectCode(t, d, 3)
	// With the sandbox the host enforces (make test requires it), it runs
	// confined without approval.
	checkProjectCode(t, start(t), 0)
}

// checkProjectCode runs the everyday tools and the project scripts against d;
// scripts' `policy check` must exit want (3 ask, 0 allowed in the sandbox).
func checkProjectCode(t *testing.T, d *harness.Daemon, want int) {
	t.Helper()
	write := func(name, data string, mode os.FileMode) {
		path := filepath.Join(d.Workspace, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("data.json", `{"name": "termd"}`, 0o644)
	write("scripts/x.sh", "#!/bin/sh\necho from-script \"$@\"\n", 0o755)
	write("x.py", "import sys\nprint('from-python', *sys.argv[1:])\n", 0o644)

	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"jq", "-r", ".name", "data.json"}, "termd\n"},
		{[]string{"seq", "3"}, "1\n2\n3\n"},
		{[]string{"uname", "-s"}, "Linux\n"},
		{[]string{"ps", "-o", "comm=", "-p", "1"}, ""},
		{[]string{"which", "ls"}, "/usr/bin/ls\n"},
		{[]string{"ls", "/etc"}, ""},
	} {
		out, errOut := expect(t, d, 0, append([]string{"run", "--"}, c.argv...)...)
		if c.want != "" && out != c.want {
			t.Errorf("%q printed %q, want %q (%s)", c.argv, out, c.want, errOut)
		}
	}

	for _, argv := range [][]string{
		{"./scripts/x.sh", "a"},
		{"scripts/x.sh", "a"},
		{filepath.Join(d.Workspace, "scripts/x.sh"), "a"},
		{"python3", "x.py", "a"},
	} {
		out, _ := expect(t, d, want, append([]string{"policy", "check", "--"}, argv...)...)
		if !strings.Contains(out, "project code") {
			t.Errorf("%q should be decided as project code:\n%s", argv, out)
		}
		if want == 0 && !strings.Contains(out, "sandbox") {
			t.Errorf("%q runs without approval only inside the sandbox; the decision should say so:\n%s", argv, out)
		}
	}
	if out, _ := expect(t, d, 0, "run", "--yes", "--", "./scripts/x.sh", "a"); out != "from-script a\n" {
		t.Errorf("the approved script printed %q", out)
	}
	if out, _ := expect(t, d, 0, "run", "--yes", "--", "python3", "x.py", "a"); out != "from-python a\n" {
		t.Errorf("the approved python script printed %q", out)
	}
	// Inline code is still an escape, and a script changed after approval is stale.
	expect(t, d, 4, "policy", "check", "--", "python3", "-c", "print(1)")
	if want != 3 {
		return
	}
	p := plan(t, d, nil, "./scripts/x.sh")
	ok(t, d, "approve", p.ID)
	write("scripts/x.sh", "#!/bin/sh\necho changed\n", 0o755)
	_, errOut := expect(t, d, 125, "execute", p.ID, "--follow")
	if !strings.Contains(errOut, "stale") {
		t.Errorf("a script changed after approval should make the plan stale, got %q", errOut)
	}
}
