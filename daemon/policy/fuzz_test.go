package policy

import (
	"strings"
	"testing"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
)

func FuzzParseArgs(f *testing.F) {
	f.Add("git", "-c\x00x=y\x00log")
	f.Add("find", ".\x00-exec\x00rm\x00;")
	f.Add("tar", "xzf\x00a.tgz")
	f.Add("sed", "-n\x001e")
	f.Add("awk", "{print > \"x\"}")
	f.Add("go", "test\x00-run=X\x00-args\x00-x")
	f.Add("chmod", "-x\x00f")
	f.Fuzz(func(t *testing.T, tool, args string) {
		argv := append([]string{tool}, strings.Split(args, "\x00")...)
		p, known, err := toolspec.ParseCommand(argv)
		if err == nil && known && p == nil {
			t.Fatal("nil parse")
		}
		if err == nil && known {
			for _, op := range p.Operands {
				if op.Kind > grammar.KPattern {
					t.Fatal("bad kind")
				}
			}
		}
	})
}

func FuzzDecide(f *testing.F) {
	fx := newFixture(f)
	f.Add("find . -name x", "", "")
	f.Add("", "bash\x00-c\x00rm -rf /", "trusted")
	f.Add("git -p log", "", "inspect")
	f.Add("", "sudo\x00timeout\x005\x00env\x00sh", "")
	f.Add("", "rm\x00-rf\x00.", "confirm")
	f.Fuzz(func(t *testing.T, cmd, argv, mode string) {
		req := decision.Request{Command: cmd, Cwd: fx.ws, Mode: verdict.Mode(mode)}
		if argv != "" {
			req.Argv = strings.Split(argv, "\x00")
		}
		d := fx.pol.Decide(req, fx.ctx)
		switch d.Verdict {
		case verdict.Allow, verdict.Ask, verdict.Deny:
		default:
			t.Fatalf("no verdict: %+v", d)
		}
		if d.Verdict == verdict.Deny && len(d.Reasons) == 0 {
			t.Fatal("deny without a reason")
		}
		if d.Verdict != verdict.Deny && (d.ResolvedPath == "" || d.BinarySHA256 == "") {
			t.Fatalf("non-deny without identity: %+v", d)
		}
		if _, err := verdict.ParseMode(mode); err != nil && mode != "" && d.Verdict != verdict.Deny {
			t.Fatal("bad mode not denied")
		}
		if len(req.Argv) > MaxArgs && d.Verdict != verdict.Deny {
			t.Fatal("oversized argv not denied")
		}
	})
}
