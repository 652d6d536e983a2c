package policy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/policy/decision"
)

func benchPolicy(b *testing.B, extra int) (*Policy, *fixture) {
	fx := newFixture(b)
	src := strings.Replace(string(defaultYAML), "trusted_path: [/usr/local/bin, /usr/bin, /bin, /usr/local/go/bin]", "trusted_path: ["+fx.bin+"]", 1)
	var sb strings.Builder
	sb.WriteString(src)
	for i := 0; i < extra; i++ {
		fmt.Fprintf(&sb, "  - {id: extra.t%04d, program: tool%04d, decision: allow, risk: low, reason: unrelated tool %d, match: [[tool%04d, x]]}\n", i, i, i, i)
	}
	p, err := Parse("bench.yaml", []byte(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	return p, fx
}

var benchReqs = [][]string{{"git", "log", "--oneline", "-n", "5"}, {"find", ".", "-name", "*.go"}, {"sed", "-n", "5p", "data.txt"}, {"rm", "-rf", "build"}, {"go", "test", "./..."}}

func benchDecide(b *testing.B, extra int) {
	p, fx := benchPolicy(b, extra)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := p.Decide(decision.Request{Argv: benchReqs[i%len(benchReqs)], Cwd: fx.ws}, fx.ctx)
		if d.Verdict == "" {
			b.Fatal("no verdict")
		}
	}
}

func BenchmarkDecideDefault(b *testing.B)        { benchDecide(b, 0) }
func BenchmarkDecide1000ExtraRules(b *testing.B) { benchDecide(b, 1000) }

// BenchmarkDecideRuleScaling reports the ratio of decision latency with
// 1,000 extra rules for unrelated programs to the default policy; rules
// are indexed by program so it stays near 1.
func BenchmarkDecideRuleScaling(b *testing.B) {
	p0, fx0 := benchPolicy(b, 0)
	p1, fx1 := benchPolicy(b, 1000)
	var base, big time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		argv := benchReqs[i%len(benchReqs)]
		t0 := time.Now()
		p0.Decide(decision.Request{Argv: argv, Cwd: fx0.ws}, fx0.ctx)
		t1 := time.Now()
		p1.Decide(decision.Request{Argv: argv, Cwd: fx1.ws}, fx1.ctx)
		big += time.Since(t1)
		base += t1.Sub(t0)
	}
	b.ReportMetric(float64(base.Nanoseconds())/float64(b.N), "ns-default/op")
	b.ReportMetric(float64(big.Nanoseconds())/float64(b.N), "ns-1000rules/op")
	b.ReportMetric(float64(big)/float64(base), "ratio")
}

// The index itself: rules for unrelated programs are not consulted.
func TestRulesIndexedByProgram(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(string(defaultYAML))
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&sb, "  - {id: extra.t%04d, program: tool%04d, decision: allow, risk: low, reason: unrelated}\n", i, i)
	}
	p, err := Parse("x.yaml", []byte(sb.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.byProg["git"]) != len(Default().byProg["git"]) || len(p.byProg["tool0007"]) != 1 {
		t.Fatal("rules not indexed by program")
	}
}
