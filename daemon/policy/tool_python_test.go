package policy

import (
	"os"
	"testing"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/verdict"
)

// uv is the worked example of adding a tool (docs/ARCHITECTURE.md, "Adding
// a tool"): its spec in tool_python.go, its rule build.uv in default.yaml,
// and this test.
func TestUv(t *testing.T) {
	f := newFixture(t)
	mustWrite(t, f.ws+"/pyproject.toml", "[project]\nname = \"x\"\n")
	mustWrite(t, f.ws+"/uv.lock", "version = 1\n")
	mustWrite(t, f.ws+"/src/sub/pyproject.toml", "[project]\nname = \"sub\"\n")

	// uv sync installs the project (its build backend runs): project code
	// on the network, so confirm mode asks, with the project's files bound
	// to the request.
	d := f.decide([]string{"uv", "sync", "--frozen"}, verdict.ModeConfirm)
	if d.Verdict != verdict.Ask || !d.RunsProjectCode || !d.Network || !grammar.Contains(d.Rules, "build.uv") {
		t.Fatalf("uv sync: %s code=%t net=%t rules %v reasons %v", d.Verdict, d.RunsProjectCode, d.Network, d.Rules, d.Reasons)
	}
	for file, want := range map[string]bool{"pyproject.toml": true, "uv.lock": true, "uv.toml": false} {
		got := d.ProjectFiles[f.ws+"/"+file]
		if want && len(got) < 7 || !want && got != "absent" {
			t.Errorf("uv sync: project file %s = %q; all %v", file, got, d.ProjectFiles)
		}
	}
	// uv fetches git dependencies with git: that git gets git's mandatory
	// settings.
	if d.ExecEnv["GIT_CONFIG_COUNT"] == "" {
		t.Errorf("uv sync: git's settings are not passed down: %v", d.ExecEnv)
	}
	// A changed pyproject.toml is a different request (the approval no
	// longer covers it).
	mustWrite(t, f.ws+"/pyproject.toml", "[project]\nname = \"x\"\n[tool.uv]\nindex-url = \"https://evil.example\"\n")
	if d2 := f.decide([]string{"uv", "sync", "--frozen"}, verdict.ModeConfirm); d2.RequestHash == d.RequestHash {
		t.Error("uv sync: editing pyproject.toml did not change the request hash")
	}

	// --directory moves where uv works: that project's files are bound, and
	// uv writes there (a protected directory is refused).
	d = f.decide([]string{"uv", "--directory", "src/sub", "sync"}, verdict.ModeConfirm)
	if d.ProjectFiles[f.ws+"/src/sub/pyproject.toml"] == "" || d.Verdict != verdict.Ask {
		t.Errorf("uv --directory src/sub sync: %s %v %v", d.Verdict, d.ProjectFiles, d.Reasons)
	}
	if d := f.decide([]string{"uv", "--directory", ".git", "sync"}, verdict.ModeTrusted); d.Verdict != verdict.Deny {
		t.Errorf("uv --directory .git sync: %s %v", d.Verdict, d.Reasons)
	}

	// What the spec refuses.
	for why, argv := range map[string][]string{
		"unknown uv subcommand": {"uv", "run", "python", "x.py"}, // runs any program: a wrapper, not in the grammar
		"interpreter":           {"uv", "--python", "/bin/sh", "sync"},
		"configuration":         {"uv", "--config-file", "x.toml", "sync"},
		"unknown option":        {"uv", "sync", "--frob"},
	} {
		d := f.decide(argv, verdict.ModeTrusted)
		if unknownArgsReason(why) {
			// unknown code, never a hard deny (issue 31): confirm asks
			if dc := f.decide(argv, verdict.ModeConfirm); d.Verdict == verdict.Deny || dc.Verdict != verdict.Ask || !hasReason(dc, why) {
				t.Errorf("%q: trusted %s, confirm %s, want unknown code with %q; reasons %v", argv, d.Verdict, dc.Verdict, why, dc.Reasons)
			}
			continue
		}
		if d.Verdict != verdict.Deny || !hasReason(d, why) {
			t.Errorf("%q: %s, want deny with %q; reasons %v", argv, d.Verdict, why, d.Reasons)
		}
	}
	// uv tree reads; trusted mode runs it without approval.
	if d := f.decide([]string{"uv", "tree", "--depth", "1"}, verdict.ModeTrusted); d.Verdict != verdict.Allow {
		t.Errorf("uv tree: %s %v", d.Verdict, d.Reasons)
	}
	if _, err := os.Stat(f.bin + "/uv"); err != nil {
		t.Fatal("the fixture has no uv program")
	}
}
