package mcpbridge_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/termd/termd/internal/cmdline"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// The agent day of the policy benchmark (daemon/policy/testdata/agentday.txt,
// issue 31), played through the real bridge: a real termd (confirm mode,
// sandbox required), termd-mcp over stdio as the agent uid 65534, the go-sdk
// client. Every command goes through terminal_run; when it asks, the
// operator (the test, root) approves over gRPC and the agent calls
// terminal_execute.

// dayLine is one command of the agent day.
type dayLine struct {
	line string
	argv []string
	kept bool // a hard denial the policy keeps on purpose
}

func loadDay(t *testing.T) []dayLine {
	t.Helper()
	data, err := os.ReadFile("../daemon/policy/testdata/agentday.txt")
	if err != nil {
		t.Fatal(err)
	}
	var day []dayLine
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		cmd, mark, _ := strings.Cut(l, "##")
		cmd = strings.TrimSpace(cmd)
		argv, err := cmdline.Split(cmd)
		if err != nil {
			t.Fatalf("agentday.txt: %s: %v", l, err)
		}
		day = append(day, dayLine{line: cmd, argv: argv, kept: strings.TrimSpace(mark) == "kept"})
	}
	return day
}

// dayFiles is the project the day works on besides the fixtures (a Go
// module and a JS package from bench/agentday/fixtures, merged at the
// root): a Go command in src, a small Python package with tests, a
// Makefile, a patch, a script, a web/ sub-package and a Rust crate.
var dayFiles = map[string]string{
	"src/main.go":          "package main\n\nimport \"fmt\"\n\n// TODO: read the input\nfunc main() { fmt.Println(\"hello\") }\n",
	"src/main.rs":          "fn main() { println!(\"hello\"); }\n",
	"data.txt":             "alpha:1\nbeta:2\nbeta:2\ngamma:3 TODO\n",
	"x.py":                 "from mathutil import mean\n\nprint(mean([1, 2, 3]))\n",
	"mathutil/__init__.py": "def mean(xs):\n    return sum(xs) / len(xs)\n",
	"tests/test_a.py":      "from mathutil import mean\n\n\ndef test_a():\n    assert mean([2, 4]) == 3\n",
	"requirements.txt":     "pytest\n",
	"pyproject.toml":       "[project]\nname = \"mathutil\"\nversion = \"0.1.0\"\n",
	"Makefile":             "all: build\nbuild:\n\tgo build ./...\ntest:\n\tgo test ./...\n",
	"script.sh":            "#!/bin/sh\necho script ran\n",
	"web/package.json":     "{\n  \"name\": \"web\",\n  \"version\": \"0.1.0\",\n  \"scripts\": {\"test\": \"node --test\"}\n}\n",
	"web/test/web.test.js": "const test = require('node:test');\ntest('web', () => {});\n",
	"Cargo.toml":           "[package]\nname = \"day\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
	"fix.patch":            "--- a/data.txt\n+++ b/data.txt\n@@ -1,4 +1,4 @@\n-alpha:1\n+alpha:10\n beta:2\n beta:2\n gamma:3 TODO\n",
	".gitignore":           ".venv/\nnode_modules/\ntarget/\n",
	"README.md":            "# day\n\nA Go module (calc), a JS package (slugify-lite) and a Python package (mathutil).\n",
	"tests/conftest.py":    "import sys, os\nsys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))\n",
}

// setUpDay makes ws a git repository holding the project, with a history
// of two commits and work in progress, owned by the agent.
func setUpDay(t *testing.T, ws string) {
	t.Helper()
	for _, p := range []string{"go", "js"} {
		if out, err := exec.Command("cp", "-r", "../bench/agentday/fixtures/"+p+"/.", ws).CombinedOutput(); err != nil {
			t.Fatalf("copying the %s fixture: %v %s", p, err, out)
		}
	}
	write := func(name, content string) {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range dayFiles {
		write(name, content)
	}
	if err := os.Chmod(filepath.Join(ws, "script.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", ws, "-c", "user.name=dev", "-c", "user.email=dev@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "initial")
	write("NOTES.md", "Average is wrong for two values.\n")
	git("add", "-A")
	git("commit", "-q", "-m", "notes")
	// Work in progress: what the day's git add / commit / stash find.
	write("src/main.go", dayFiles["src/main.go"]+"\n// more\n")
	write("data.txt", dayFiles["data.txt"]+"delta:4\n")
	if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", harness.Nobody.Uid, harness.Nobody.Gid), ws).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
}

// askKind names why a plan asks, from its reasons (the policy's words): what
// issue 31 expects to ask, or "other". Publishing to a remote (git push)
// counts as the network.
func askKind(reasons []string) string {
	r := strings.Join(reasons, " ")
	has := func(words ...string) bool {
		return slices.ContainsFunc(words, func(w string) bool { return strings.Contains(r, w) })
	}
	switch {
	case has("privileged", "real host root"):
		return "privilege"
	case has("uses the network", "from the network", "to a remote", "from a remote"):
		return "network"
	case has("outside the workspace"):
		return "outside paths"
	case has("is an entry file"):
		return "entry files"
	case has("removes files", "(rule git.history)", "(history)", "discards", "abandons"),
		has("(rule git.") && has("is not a plain edit"):
		return "removal/history"
	}
	return "other"
}

var askKinds = []string{"network", "removal/history", "entry files", "outside paths", "privilege", "other"}

// dayTally is what the day cost.
type dayTally struct {
	commands, everyday, ran, calls int
	denied                         []string // everyday commands the policy refused
	notInstalled                   []string // refused: the program is not in the trusted PATH here
	keptDenied, keptAllowed        []string
	asks                           map[string][]string // by kind
	failed                         []string            // ran and ended other than succeeded / exit 0
	bytes, excess                  []int               // per command: the content of the result a model reads
}

// playDay sends each line through terminal_run (and terminal_execute after
// the operator approves one that asks).
func playDay(t *testing.T, d *harness.Daemon, cs *mcp.ClientSession, day []dayLine) *dayTally {
	t.Helper()
	ctx := context.Background()
	tl := &dayTally{asks: map[string][]string{}}
	for _, l := range day {
		tl.commands++
		if !l.kept {
			tl.everyday++
		}
		// The client waits as long as the call may (a cold build on a busy
		// machine takes minutes), not call's usual 2 minutes.
		run, res := callWithin(t, cs, "terminal_run", map[string]any{"argv": l.argv, "timeout_seconds": 300, "wait_seconds": 600}, false, 11*time.Minute)
		tl.calls++
		reasons := func() []string {
			var out []string
			if rs, ok := run["reasons"].([]any); ok {
				for _, r := range rs {
					out = append(out, fmt.Sprint(r))
				}
			}
			return out
		}
		switch state := str(run, "state"); state {
		case "blocked":
			why := l.line + " — " + strings.Join(reasons(), "; ")
			switch {
			case l.kept:
				tl.keptDenied = append(tl.keptDenied, why)
			case slices.ContainsFunc(reasons(), func(r string) bool { return strings.Contains(r, "was not found in the trusted PATH") }):
				tl.notInstalled = append(tl.notInstalled, l.argv[0])
			default:
				tl.denied = append(tl.denied, why)
			}
			tl.bytes = append(tl.bytes, contentBytes(t, res))
			tl.excess = append(tl.excess, contentBytes(t, res))
			continue
		case "awaiting_approval":
			kind := askKind(reasons())
			name := l.line
			if rs := reasons(); kind == "other" && len(rs) > 0 {
				name += " (" + rs[0] + ")"
			}
			tl.asks[kind] = append(tl.asks[kind], name)
			id := str(run, "plan_id")
			p, err := d.Client.Plans.GetPlan(ctx, &termdv1.GetPlanRequest{PlanId: id})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.Client.Plans.ApprovePlan(ctx, &termdv1.ApprovePlanRequest{PlanId: id, RequestHash: p.GetPlan().GetDecision().GetRequestHash()}); err != nil {
				t.Fatalf("approving %q: %v", l.line, err)
			}
			run, res = callWithin(t, cs, "terminal_execute", map[string]any{"plan_id": id, "wait_seconds": 600}, false, 11*time.Minute)
			tl.calls++
		case "":
			t.Fatalf("terminal_run %q: no state: %s", l.line, text(res))
		}
		if l.kept {
			tl.keptAllowed = append(tl.keptAllowed, l.line)
		}
		tl.ran++
		n := contentBytes(t, res)
		tl.bytes = append(tl.bytes, n)
		tl.excess = append(tl.excess, n-len(str(run, "stdout"))-len(str(run, "stderr")))
		if str(run, "state") != "succeeded" || run["exit_code"] != float64(0) {
			why, _, _ := strings.Cut(strings.TrimSpace(str(run, "stderr")), "\n")
			tl.failed = append(tl.failed, fmt.Sprintf("%s (%s, exit %v: %.100s)", l.line, str(run, "state"), run["exit_code"], why))
		}
	}
	return tl
}

// startDay starts termd in confirm mode with the sandbox required, the
// workspace set up, and termd-mcp over stdio as the agent uid.
func startDay(t *testing.T) (*harness.Daemon, *mcp.ClientSession) {
	t.Helper()
	needRoot(t)
	d := harness.Start(t, harness.Options{Config: agentConfig + "sandbox: required\n", Args: []string{"--console-url", consoleURL}})
	setUpDay(t, d.Workspace)
	return d, connect(t, d, transports[0], &clientRecorder{}, false)
}

// checkDay fails the test on a hard denial of an everyday command or a kept
// denial that ran.
func checkDay(t *testing.T, tl *dayTally) {
	t.Helper()
	for _, l := range tl.denied {
		t.Errorf("everyday command denied: %s", l)
	}
	for _, l := range tl.keptAllowed {
		t.Errorf("kept denial not denied: %s", l)
	}
}

func percentile(xs []int, p float64) int {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func mean(xs []int) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0
	for _, x := range xs {
		sum += x
	}
	return float64(sum) / float64(len(xs))
}

// TestBenchMCPAgentDay plays the whole agent day through the bridge and
// prints what it cost (issue 31). Run with `make bench` (TERMD_BENCH=1).
func TestBenchMCPAgentDay(t *testing.T) {
	if os.Getenv("TERMD_BENCH") != "1" {
		t.Skip("benchmark: run with TERMD_BENCH=1 (make bench)")
	}
	day := loadDay(t)
	if len(day) < 150 {
		t.Fatalf("the agent day has %d commands; it needs at least 150", len(day))
	}
	d, cs := startDay(t)
	tl := playDay(t, d, cs, day)
	report := func(format string, args ...any) {
		s := fmt.Sprintf(format, args...)
		fmt.Println("BENCH mcp-agentday: " + s)
		t.Log(s)
	}
	asked := 0
	for _, k := range askKinds {
		asked += len(tl.asks[k])
	}
	report("%d commands (%d everyday, %d kept denials) through terminal_run over stdio, agent uid %d, confirm mode, sandbox required", tl.commands, tl.everyday, tl.commands-tl.everyday, harness.Nobody.Uid)
	report("everyday hard-denied %d; not installed here (denied: not in the trusted PATH) %d %v; kept denials denied %d of %d", len(tl.denied), len(tl.notInstalled), tl.notInstalled, len(tl.keptDenied), tl.commands-tl.everyday)
	report("asked %d: %s", asked, func() string {
		var parts []string
		for _, k := range askKinds {
			parts = append(parts, fmt.Sprintf("%s %d", k, len(tl.asks[k])))
		}
		return strings.Join(parts, ", ")
	}())
	for _, k := range askKinds {
		if len(tl.asks[k]) > 0 {
			report("asked (%s): %s", k, strings.Join(tl.asks[k], " | "))
		}
	}
	report("ran %d; tool calls per command %.2f (%d calls)", tl.ran, float64(tl.calls)/float64(tl.commands), tl.calls)
	report("bytes per result (all content blocks): median %d, p90 %d, max %d; beyond the output: mean %.0f, median %d", percentile(tl.bytes, 0.5), percentile(tl.bytes, 0.9), percentile(tl.bytes, 1), mean(tl.excess), percentile(tl.excess, 0.5))
	report("ran and did not succeed (%d): %s", len(tl.failed), strings.Join(tl.failed, " | "))
	checkDay(t, tl)
	if len(tl.keptDenied) != tl.commands-tl.everyday {
		t.Errorf("kept denials denied %d of %d", len(tl.keptDenied), tl.commands-tl.everyday)
	}
}

// quickDay is a representative slice of the agent day for every `go test`:
// exploring, git workflows, interpreters, wrappers, edits, a removal and a
// history rewrite (asks), and two kept denials.
var quickDay = []string{
	"ls -la", "grep -rn TODO .", "git status --short", "git stash", "git stash list", "git stash pop",
	"git add -A", "git commit -m \"fix: handle empty input\"", "git tag v0.1.0", "git describe --tags --always",
	"git reset --hard HEAD", "node --version", "python3 --version", "node --test test", "npm test --prefix web",
	"timeout 10 make -n", "env NODE_ENV=test node --version", "sed -i s/foo/bar/ src/main.go", "rm data.txt",
	"python3 x.py", "sudo apt-get install jq", "bash -c \"make test\"",
}

// TestMCPAgentDayQuick plays quickDay through the bridge: no everyday
// command is hard-denied, the kept denials are denied, and an approved ask
// runs with one more call.
func TestMCPAgentDayQuick(t *testing.T) {
	var day []dayLine
	all := loadDay(t)
	for _, q := range quickDay {
		i := slices.IndexFunc(all, func(l dayLine) bool { return l.line == q })
		if i < 0 {
			// not in the day file: the quick day's own additions
			argv, err := cmdline.Split(q)
			if err != nil {
				t.Fatal(err)
			}
			day = append(day, dayLine{line: q, argv: argv})
			continue
		}
		day = append(day, all[i])
	}
	d, cs := startDay(t)
	tl := playDay(t, d, cs, day)
	t.Logf("%d commands: denied %d, asked %v, ran %d, %d tool calls, failed %v", tl.commands, len(tl.denied), tl.asks, tl.ran, tl.calls, tl.failed)
	checkDay(t, tl)
	if len(tl.keptDenied) != 2 {
		t.Errorf("kept denials denied: %v; want sudo and bash -c", tl.keptDenied)
	}
	if len(tl.notInstalled) > 0 {
		t.Errorf("programs of the quick day not in the trusted PATH: %v", tl.notInstalled)
	}
	if got := tl.asks["removal/history"]; len(got) != 2 {
		t.Errorf("asked for a removal or a history rewrite: %v; want git reset --hard and rm", got)
	}
	asked := 0
	for _, k := range askKinds {
		asked += len(tl.asks[k])
	}
	if tl.ran != tl.commands-2 || tl.calls != tl.commands+asked {
		t.Errorf("ran %d of %d with %d calls", tl.ran, tl.commands, tl.calls)
	}
}
