package policy

import (
	"strings"
	"testing"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/grant"
	"github.com/termd/termd/daemon/policy/verdict"
)

func TestGrantPatterns(t *testing.T) {
	p := Default()
	argv := []string{"git", "commit", "-m", "fix the parser"}
	pt, err := p.ParsePattern("git commit -m <any>", argv)
	if err != nil {
		t.Fatal(err)
	}
	if pt.String() != "git commit -m <any>" {
		t.Fatalf("pattern shown as %q", pt.String())
	}
	for _, c := range []struct {
		argv []string
		want bool
	}{
		{[]string{"git", "commit", "-m", "another message"}, true},
		{[]string{"git", "commit", "-m", "-x looks like an option but is the message"}, true},
		{[]string{"git", "commit", "--amend", "-m", "x"}, false},
		{[]string{"git", "commit", "-m", "x", "--amend"}, false},
		{[]string{"git", "commit", "-am", "x"}, false},
		{[]string{"git", "push", "-m", "x"}, false},
		{[]string{"/usr/bin/git", "commit", "-m", "x"}, false},
	} {
		if got := pt.Matches(c.argv); got != c.want {
			t.Errorf("%q: matches %v, want %v", c.argv, got, c.want)
		}
	}
	npm, err := p.ParsePattern("npm install <any>", []string{"npm", "install", "left-pad"})
	if err != nil {
		t.Fatal(err)
	}
	if npm.Matches([]string{"npm", "install", "-g"}) || !npm.Matches([]string{"npm", "install", "lodash"}) {
		t.Error("an operand position must not take an option")
	}
	exact, err := p.ParsePattern("", argv)
	if err != nil || !exact.Matches(argv) || exact.Matches([]string{"git", "commit", "-m", "y"}) {
		t.Errorf("an empty pattern is the approved argv: %v", err)
	}
	for text, why := range map[string]string{
		"git <any> -m <any>":         "subcommand",
		"git commit <any> <any>":     "option",
		"<any> commit -m <any>":      "program is fixed",
		"git commit -m":              "words",
		"git commit -m <any> <any>":  "words",
		"git commit -q <any>":        "word 3",
		"git commit -m pre<any>post": "whole word",
	} {
		if _, err := p.ParsePattern(text, argv); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("pattern %q: %v; want an error naming %q", text, err, why)
		}
	}
}

func TestGrantBindingNeverWidensADeny(t *testing.T) {
	f := newFixture(t)
	asked := f.decide([]string{"touch", "x"}, verdict.ModeConfirm)
	if asked.Verdict != verdict.Ask {
		t.Fatalf("touch in confirm mode: %s", asked.Verdict)
	}
	b := grant.BindingOf(asked)
	if why := b.Uncovered(asked); why != "" {
		t.Fatalf("the approved decision itself is not covered: %s", why)
	}
	denied := f.decide([]string{"touch", ".git/hooks/pre-commit"}, verdict.ModeConfirm)
	if why := b.Uncovered(denied); why == "" {
		t.Fatal("a grant covered a denied request")
	}
	other := asked
	other.BinarySHA256 = strings.Repeat("0", 64)
	if why := b.Uncovered(other); !strings.Contains(why, "program") {
		t.Fatalf("another program hash: %q", why)
	}
	other = asked
	other.Sandbox.Profile = decision.SandboxReadOnly
	if why := b.Uncovered(other); !strings.Contains(why, "sandbox") {
		t.Fatalf("another sandbox profile: %q", why)
	}
	other = asked
	other.PolicyVersion = "sha256:other"
	if why := b.Uncovered(other); !strings.Contains(why, "policy changed") {
		t.Fatalf("another policy version: %q", why)
	}
	other = asked
	other.ProjectFiles = map[string]string{"/w/Makefile": "abc"}
	if why := b.Uncovered(other); !strings.Contains(why, "entry files") {
		t.Fatalf("changed entry files: %q", why)
	}
}
