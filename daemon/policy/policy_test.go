package policy

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/verdict"
)

func TestDefaultLoads(t *testing.T) {
	p := Default()
	if p.DefaultMode() != verdict.ModeConfirm {
		t.Fatalf("default mode %s", p.DefaultMode())
	}
	if !strings.HasPrefix(p.Version(), "sha256:") || len(p.Version()) != 71 {
		t.Fatalf("version %q", p.Version())
	}
	want := []string{"/usr/local/bin", "/usr/bin", "/bin", "/usr/local/go/bin"}
	if strings.Join(p.TrustedPath(), ":") != strings.Join(want, ":") {
		t.Fatalf("trusted path %v", p.TrustedPath())
	}
	l := p.Limits()
	if l.DefaultTimeout != 10*time.Minute || l.MaxTimeout != time.Hour || l.OutputBytes <= 0 || l.Pids <= 0 {
		t.Fatalf("limits %+v", l)
	}
	if !p.NetworkAllowed() {
		t.Fatal("default policy allows network (with approval)")
	}
	if !grammar.Contains(p.EnvAllowlist(), "LANG") || grammar.Contains(p.EnvAllowlist(), "PATH") {
		t.Fatalf("env allowlist %v", p.EnvAllowlist())
	}
	// Canonical is stable and re-parsing the same text gives the same version.
	q, err := Parse("again.yaml", defaultYAML)
	if err != nil || q.Version() != p.Version() || string(q.Canonical()) != string(p.Canonical()) {
		t.Fatalf("version not stable: %v", err)
	}
}

func TestParseModes(t *testing.T) {
	for _, m := range []string{"inspect", "confirm", "trusted"} {
		if got, err := verdict.ParseMode(m); err != nil || string(got) != m {
			t.Fatalf("ParseMode(%s) = %v, %v", m, got, err)
		}
	}
	for _, m := range []string{"", "Trusted", "yolo"} {
		if _, err := verdict.ParseMode(m); err == nil {
			t.Fatalf("ParseMode(%q) accepted", m)
		}
	}
}

// mutate replaces old with new in the default policy text.
func mutate(t *testing.T, old, new string) []byte {
	t.Helper()
	s := string(defaultYAML)
	if !strings.Contains(s, old) {
		t.Fatalf("default policy lacks %q", old)
	}
	return []byte(strings.Replace(s, old, new, 1))
}

func lineOf(data []byte, needle string) int {
	i := strings.Index(string(data), needle)
	return strings.Count(string(data[:i]), "\n") + 1
}

func TestStrictLoading(t *testing.T) {
	cases := []struct {
		name, old, new, want string
		lineOf               string // text whose line the error must name
	}{
		{"unknown top key", "default_mode: confirm", "default_mode: confirm\nfrobnicate: 1", `unknown key "frobnicate"`, "frobnicate"},
		{"unknown rule key", "{id: read.cat, program: cat,", "{id: read.cat, program: cat, colour: red,", `unknown key "colour"`, "colour: red"},
		{"bad decision", "{id: read.wc, program: wc, decision: allow", "{id: read.wc, program: wc, decision: maybe", "decision must be", "id: read.wc"},
		{"bad risk", "{id: read.wc, program: wc, decision: allow, risk: low", "{id: read.wc, program: wc, decision: allow, risk: tiny", "risk must be", "id: read.wc"},
		{"duplicate id", "{id: read.wc, program: wc,", "{id: read.cat, program: wc,", "duplicate rule id", "id: read.cat, program: wc"},
		{"duplicate selector", "{id: read.wc, program: wc,", "{id: read.wc2, program: cat,", "duplicate rule", "id: read.wc2"},
		{"failing match", `match: [[wc, -l, f]]`, `match: [[wc, --bogus, f]]`, "does not match", "id: read.wc"},
		{"failing not_match", `not_match: [[file, -S, f]]`, `not_match: [[file, -b, f]]`, "not_match example", "id: read.file"},
		{"bad mode", "default_mode: confirm", "default_mode: yolo", "unknown mode", "default_mode"},
		{"bad duration", "default_timeout: 10m", "default_timeout: soon", "positive duration", "default_timeout"},
		{"relative trusted path", "trusted_path: [/usr/local/bin,", "trusted_path: [bin,", "clean absolute", "trusted_path"},
		{"bad version", "version: 1", "version: 2", "version must be 1", "version"},
		{"wrong type", "network: true", "network: [1]", "", "network"},
		{"duplicate key", "network: true", "network: true\nnetwork: false", "", "network: false"},
		{"allow conflicts deny", "allow: [LANG,", "allow: [PATH, LANG,", "also denied", "allow: [PATH"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := mutate(t, c.old, c.new)
			_, err := Parse("p.yaml", data)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q lacks %q", err, c.want)
			}
			want := "p.yaml:" + strconv.Itoa(lineOf(data, c.lineOf)) + ":"
			if !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("error %q does not start with %q", err, want)
			}
		})
	}
}

func TestEngineReloadKeepsLastGood(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(path, defaultYAML, 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(path)
	if err != nil {
		t.Fatal(err)
	}
	v1 := e.Current().Version()
	if changed, err := e.Reload(); err != nil || changed {
		t.Fatalf("reload of same file: %v %v", changed, err)
	}
	if err := os.WriteFile(path, []byte("version: 1\nbogus: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Reload(); err == nil || !strings.Contains(err.Error(), "policy.yaml") {
		t.Fatalf("bad policy reloaded: %v", err)
	}
	if e.Current().Version() != v1 {
		t.Fatal("bad reload replaced the policy")
	}
	if err := os.WriteFile(path, mutate(t, "network: true", "network: false"), 0o600); err != nil {
		t.Fatal(err)
	}
	changed, err := e.Reload()
	if err != nil || !changed || e.Current().Version() == v1 || e.Current().NetworkAllowed() {
		t.Fatalf("good reload: %v %v", changed, err)
	}
	if err := Lint(path); err != nil {
		t.Fatal(err)
	}
	d0, err := NewEngine("")
	if err != nil || d0.Current() != Default() {
		t.Fatal("NewEngine(\"\") is not the default policy")
	}
}

const projectHeader = "version: 1\nkind: project\n"

func TestNarrow(t *testing.T) {
	f := newFixture(t)
	sys := f.pol
	refuse := []struct{ name, body, want string }{
		{"allow rule", "rules:\n  - {id: p.x, program: nc, decision: allow, risk: low, reason: x}\n", "allows"},
		{"trusted path", "trusted_path: [/tmp]\n", "trusted_path adds"},
		{"env", "env: {allow: [FOO]}\n", "env.allow adds"},
		{"mode", "default_mode: trusted\n", "more permissive"},
		{"limits", "limits: {max_timeout: 10h}\n", "limits exceed"},
		{"programs", "programs: {git: {exec_args: [x]}}\n", "programs"},
		{"exact ask", "rules:\n  - {id: p.sh, exact: [sh, -c, make], decision: ask, risk: high, reason: x}\n", "exact"},
	}
	for _, c := range refuse {
		proj, err := Parse("proj.yaml", []byte(projectHeader+c.body))
		if err != nil {
			t.Fatalf("%s: parse: %v", c.name, err)
		}
		if _, err := sys.Narrow(proj); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: widening accepted or wrong error: %v", c.name, err)
		}
	}
	proj, err := Parse("proj.yaml", []byte(projectHeader+"network: false\nrules:\n  - {id: p.no-rm, program: rm, decision: deny, risk: high, reason: no removals here}\n  - {id: p.ask-cat, program: cat, decision: ask, risk: medium, reason: cat needs approval here}\n"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := sys.Narrow(proj)
	if err != nil {
		t.Fatal(err)
	}
	if n.Version() == sys.Version() || n.NetworkAllowed() {
		t.Fatal("narrowed policy should differ and deny network")
	}
	f.pol = n
	if d := f.decide([]string{"rm", "data.txt"}, verdict.ModeTrusted); d.Verdict != verdict.Deny || !hasReason(d, "no removals here") {
		t.Fatalf("project deny rule ignored: %+v", d.Reasons)
	}
	if d := f.decide([]string{"cat", "data.txt"}, verdict.ModeConfirm); d.Verdict != verdict.Ask {
		t.Fatalf("project ask rule ignored: %s", d.Verdict)
	}
	if d := f.decide([]string{"curl", "https://e.com"}, verdict.ModeTrusted); d.Verdict != verdict.Deny || !hasReason(d, "network") {
		t.Fatalf("network not denied: %v", d.Reasons)
	}
	if d := f.decide([]string{"ls"}, verdict.ModeConfirm); d.Verdict != verdict.Allow {
		t.Fatalf("unrelated command changed: %v", d.Reasons)
	}
}

func TestExactRuleNamesEscape(t *testing.T) {
	f := newFixture(t)
	src := strings.Replace(string(defaultYAML), "trusted_path: [/usr/local/bin, /usr/bin, /bin, /usr/local/go/bin]", "trusted_path: ["+f.bin+"]", 1)
	src += "  - {id: exact.lint, exact: [bash, -c, make lint], decision: ask, risk: high, reason: the project's lint entry point, match: [[bash, -c, make lint]], not_match: [[bash, -c, make lint; id]]}\n"
	p, err := Parse("x.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	f.pol = p
	if d := f.decide([]string{"bash", "-c", "make lint"}, ""); d.Verdict != verdict.Ask || d.Rules[0] != "exact.lint" {
		t.Fatalf("exact rule not applied: %s %v", d.Verdict, d.Reasons)
	}
	for _, a := range [][]string{{"bash", "-c", "make lint "}, {"bash", "-c", "make lint", "x"}, {"sh", "-c", "make lint"}} {
		if d := f.decide(a, verdict.ModeTrusted); d.Verdict != verdict.Deny {
			t.Fatalf("%q not exact but %s", a, d.Verdict)
		}
	}
}
