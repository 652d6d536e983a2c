package policy

import (
	"os"
	"strings"
	"testing"
	"time"

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
	// TTY: the case and its twin ask for a terminal.
	TTY bool `yaml:"tty"`
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
			req  Request
		}
		var vs []variant
		var tty *Terminal
		if c.TTY {
			tty = &Terminal{Rows: 24, Cols: 80}
		}
		base := Request{Cwd: cwd, Env: env, Mode: Mode(c.Mode), Timeout: timeout, TTY: tty}
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
		for _, v := range vs {
			runs++
			d := f.pol.Decide(v.req, f.ctx)
			if d.Verdict == Allow {
				t.Errorf("hostile %s/%s %q: allowed; reasons %q", c.Name, v.name, v.req.Argv, d.Reasons)
				continue
			}
			if !hasReason(d, c.Reason) {
				t.Errorf("hostile %s/%s %q: %s without reason containing %q; reasons %q", c.Name, v.name, v.req.Argv, d.Verdict, c.Reason, d.Reasons)
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
			mode := Mode(c.Mode)
			if _, err := ParseMode(c.Mode); err != nil {
				mode = ""
			}
			for _, a := range [][]string{twin, append([]string{f.bin + "/" + twin[0]}, twin[1:]...)} {
				if strings.HasPrefix(twin[0], "/") && len(a) > 0 && a[0] != twin[0] {
					continue
				}
				runs++
				d := f.pol.Decide(Request{Argv: a, Cwd: tcwd, Env: tenv, Mode: mode, TTY: tty}, f.ctx)
				if d.Verdict == Deny {
					t.Errorf("benign twin of %s %q: denied; reasons %q", c.Name, a, d.Reasons)
				}
			}
		}
	}
	t.Logf("corpus: %d base cases, %d decisions", len(cases), runs)
	if len(cases) < 100 || runs < 150 {
		t.Fatalf("corpus too small: %d cases, %d runs", len(cases), runs)
	}
}
