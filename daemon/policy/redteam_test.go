package policy

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestRedteam(t *testing.T) {
	if os.Getenv("RT") == "" {
		t.Skip()
	}
	f := newFixture(t)
	data, _ := os.ReadFile("/tmp/rt/cases.txt")
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		argv, err := SplitCommand(f.subst(line))
		if err != nil {
			// allow raw tab-separated
			argv = strings.Split(f.subst(line), "\t")
		}
		d := f.pol.Decide(Request{Argv: argv, Cwd: f.ws, Mode: Mode(os.Getenv("RTMODE"))}, f.ctx)
		r := strings.Join(d.Reasons, " | ")
		if len(r) > 200 {
			r = r[:200]
		}
		fmt.Printf("%-5s %-8s %s\n        %s\n", d.Verdict, d.Risk, line, r)
	}
}
