package policy

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/verdict"
	"github.com/termd/termd/internal/cmdline"
	"go.yaml.in/yaml/v3"
)

type corpusCase struct {
	Name    string            `yaml:"name"`
	Argv    []string          `yaml:"argv"`
	Cmd     string            `yaml:"cmd"`
	Env     map[string]string `yaml:"env"`
	Mode    string            `yaml:"mode"`
	Cwd     string            `yaml:"cwd"`
	Timeout string            `yaml:"timeout"`
	Reason  string            `yaml:"reason"`
	Spell   *bool             `yaml:"spell"`
	Twin    []string          `yaml:"twin"`
	TwinEnv map[string]string `yaml:"twin_env"`
	// Sandboxed: under a fully enforced sandbox the case runs without
	// approval by design (confined project code, a plain workspace write),
	// with a reason containing this; its other spellings still must not
	// be allowed.
	Sandboxed string `yaml:"sandboxed"`
	// SandboxReason: the reason expected under the enforced sandbox when it
	// differs from Reason.
	SandboxReason string `yaml:"sandbox_reason"`
	// Grantable: an ordinary command that asks for a person's decision, not
	// an attack; an operator's grant may cover it (bench/agentday).
	Grantable bool `yaml:"grantable"`
	// TTY: the case and its twin ask for a terminal.
	TTY bool `yaml:"tty"`
}

// corpusContexts: every case is decided with the sandbox unavailable and
// with it fully enforced.
func corpusContexts(f *fixture) map[string]decision.Context {
	enforced := f.ctx
	enforced.Sandbox, enforced.SandboxBy = true, "Landlock"
	return map[string]decision.Context{"sandbox-unavailable": f.ctx, "sandbox-enforced": enforced}
}

func loadCorpus(t *testing.T) []corpusCase {
	data, err := os.ReadFile("testdata/corpus.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cs []corpusCase
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

// spellings returns the hostile argv under several spellings.
func spellings(f *fixture, argv []string) map[string][]string {
	name := argv[0]
	rest := argv[1:]
	return map[string][]string{
		"bare":    argv,
		"abs":     append([]string{f.bin + "/" + name}, rest...),
		"dot":     append([]string{"./" + name}, rest...),
		"env":     append([]string{"env"}, argv...),
		"timeout": append([]string{"timeout", "5"}, argv...),
		"sudo":    append([]string{"sudo"}, argv...),
		"bash-c":  {"bash", "-c", cmdline.Quote(argv)},
	}
}

func TestAdversarialCorpus(t *testing.T) {
	f := newFixture(t)
	cases := loadCorpus(t)
	names := map[string]bool{}
	runs := 0
	for _, c := range cases {
		if names[c.Name] {
			t.Fatalf("duplicate corpus case %s", c.Name)
		}
		names[c.Name] = true
		if c.Reason == "" || (len(c.Argv) == 0) == (c.Cmd == "") {
			t.Fatalf("case %s: needs a reason and exactly one of argv/cmd", c.Name)
		}
		env := map[string]string{}
		for k, v := range c.Env {
			env[k] = f.subst(v)
		}
		cwd := f.ws
		if c.Cwd != "" {
			cwd = f.subst(c.Cwd)
			if !strings.HasPrefix(cwd, "/") {
				cwd = f.ws + "/" + cwd
			}
		}
		var timeout time.Duration
		if c.Timeout != "" {
			timeout, _ = time.ParseDuration(c.Timeout)
		}
		argv := make([]string, len(c.Argv))
		for i, a := range c.Argv {
			argv[i] = f.subst(a)
		}
		type variant struct {
			name string
			req  decision.Request
		}
		var vs []variant
		var tty *decision.Terminal
		if c.TTY {
			tty = &decision.Terminal{Rows: 24, Cols: 80}
		}
		base := decision.Request{Cwd: cwd, Env: env, Mode: verdict.Mode(c.Mode), Timeout: timeout, TTY: tty}
		if c.Cmd != "" {
			r := base
			r.Command = c.Cmd
			vs = append(vs, variant{"cmd", r})
		} else if c.Spell != nil && !*c.Spell {
			r := base
			r.Argv = argv
			vs = append(vs, variant{"bare", r})
		} else {
			for sp, a := range spellings(f, argv) {
				r := base
				r.Argv = a
				vs = append(vs, variant{sp, r})
			}
		}
		for cname, ctx := range corpusContexts(f) {
			enforced := ctx.Sandbox
			for _, v := range vs {
				runs++
				d := f.pol.Decide(v.req, ctx)
				reason := c.Reason
				if enforced && c.SandboxReason != "" {
					reason = c.SandboxReason
				}
				switch {
				case enforced && c.Sandboxed != "" && d.Verdict == verdict.Allow:
					if !hasReason(d, c.Sandboxed) {
						t.Errorf("%s %s/%s %q: allowed without a reason containing %q; reasons %q", cname, c.Name, v.name, v.req.Argv, c.Sandboxed, d.Reasons)
					}
				case enforced && c.Sandboxed != "" && v.name == "bare":
					t.Errorf("%s %s %q: %s, want allow (marked sandboxed); reasons %q", cname, c.Name, v.req.Argv, d.Verdict, d.Reasons)
				case enforced && c.Sandboxed != "":
					// another spelling of a case the sandbox lets run: not
					// allowed is all that is asked of it
				case d.Verdict == verdict.Allow:
					t.Errorf("%s hostile %s/%s %q: allowed; reasons %q", cname, c.Name, v.name, v.req.Argv, d.Reasons)
				case !hasReason(d, reason):
					t.Errorf("%s hostile %s/%s %q: %s without reason containing %q; reasons %q", cname, c.Name, v.name, v.req.Argv, d.Verdict, reason, d.Reasons)
				}
			}
		}
		if len(c.Twin) > 0 {
			twin := make([]string, len(c.Twin))
			for i, a := range c.Twin {
				twin[i] = f.subst(a)
			}
			tenv := map[string]string{}
			for k, v := range c.TwinEnv {
				tenv[k] = v
			}
			tcwd := cwd
			if strings.HasPrefix(c.Cwd, "{") {
				tcwd = f.ws // the twin of a bad cwd runs in the workspace
			}
			mode := verdict.Mode(c.Mode)
			if _, err := verdict.ParseMode(c.Mode); err != nil {
				mode = ""
			}
			for cname, ctx := range corpusContexts(f) {
				for _, a := range [][]string{twin, append([]string{f.bin + "/" + twin[0]}, twin[1:]...)} {
					if strings.HasPrefix(twin[0], "/") && len(a) > 0 && a[0] != twin[0] {
						continue
					}
					runs++
					d := f.pol.Decide(decision.Request{Argv: a, Cwd: tcwd, Env: tenv, Mode: mode, TTY: tty}, ctx)
					if d.Verdict == verdict.Deny {
						t.Errorf("%s benign twin of %s %q: denied; reasons %q", cname, c.Name, a, d.Reasons)
					}
				}
			}
		}
	}
	t.Logf("corpus: %d base cases, %d decisions", len(cases), runs)
	if len(cases) < 100 || runs < 150 {
		t.Fatalf("corpus too small: %d cases, %d runs", len(cases), runs)
	}
}
