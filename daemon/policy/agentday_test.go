package policy

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/verdict"
	"github.com/termd/termd/internal/cmdline"
)

// TestBenchPolicyAgentDay decides an ordinary agent day (testdata/agentday.txt,
// 197 commands) in confirm mode, with the sandbox fully enforced and with it
// unavailable, and counts what is denied, what asks and what runs without
// approval (issue 31: nothing ordinary is hard-denied). It fails when an
// everyday command is denied, a kept denial is not, or a line marked runs
// (a curl to the principal's dev server) asks with the sandbox enforced. `make bench` prints the
// counts (TERMD_BENCH=1).
func TestBenchPolicyAgentDay(t *testing.T) {
	f := newFixture(t)
	for _, fl := range []string{"package.json", "index.js", "test/a.test.js", "tests/test_a.py", "fix.patch", "requirements.txt", "web/package.json", "Makefile", "go.mod", "Cargo.toml"} {
		mustWrite(t, f.ws+"/"+fl, "x\n")
	}
	if err := os.Chmod(f.ws+"/script.sh", 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/agentday.txt")
	if err != nil {
		t.Fatal(err)
	}
	type line struct {
		argv       []string
		kept, runs bool
	}
	var day []line
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		cmd, mark, _ := strings.Cut(l, "##")
		argv, err := cmdline.Split(strings.TrimSpace(cmd))
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		day = append(day, line{argv, strings.TrimSpace(mark) == "kept", strings.TrimSpace(mark) == "runs"})
	}
	if len(day) < 150 {
		t.Fatalf("the agent day has %d commands; it needs at least 150", len(day))
	}
	report := func(format string, args ...any) {
		s := fmt.Sprintf(format, args...)
		if os.Getenv("TERMD_BENCH") != "" {
			fmt.Println("BENCH policy-agentday: " + s)
		}
		t.Log(s)
	}
	enforced := f.ctx
	enforced.Sandbox, enforced.SandboxBy = true, "Landlock"
	// termd as root runs the egress proxy with its built-in allow-list of
	// package registries (egress.allow_lists; docs/SANDBOX.md, Network).
	enforced.EgressLists = []string{"registries"}
	for _, c := range []struct {
		name string
		ctx  decision.Context
	}{{"sandbox enforced", enforced}, {"sandbox unavailable", f.ctx}} {
		var denied, asked, ran, kept int
		var askedLines []string
		for _, l := range day {
			d := f.pol.Decide(decision.Request{Argv: l.argv, Cwd: f.ws, Mode: verdict.ModeConfirm}, c.ctx)
			switch {
			case l.kept:
				kept++
				if d.Verdict != verdict.Deny || !hasReason(d, "even inside the sandbox") {
					t.Errorf("%s: kept denial %q: %s %q", c.name, l.argv, d.Verdict, d.Reasons)
				}
			case d.Verdict == verdict.Deny:
				denied++
				t.Errorf("%s: everyday command %q denied: %q", c.name, l.argv, d.Reasons)
			case d.Verdict == verdict.Ask && l.runs && c.ctx.Sandbox:
				asked++
				t.Errorf("%s: %q asks, but must run without approval: %q", c.name, l.argv, d.Reasons)
			case d.Verdict == verdict.Ask:
				asked++
				askedLines = append(askedLines, cmdline.Quote(l.argv))
			default:
				ran++
			}
		}
		report("%-20s everyday %d: denied %d, asked %d, ran without approval %d; kept hard denials %d", c.name+":", len(day)-kept, denied, asked, ran, kept)
		if c.ctx.Sandbox {
			report("asked with the sandbox enforced: %s", strings.Join(askedLines, " | "))
		}
	}
}
