package policy

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/verdict"
)

// The sandbox profile and the explain steps are internal/policyjson's types
// (termctl prints the daemon's own). Their JSON is part of the decision
// journaled with every plan, of the canonical request its hash is taken of,
// and of what a grant compares: on real decisions it is byte for byte what
// the daemon's own types gave before they moved (legacyProfile, legacyStep:
// their definitions as they were, which Go converts to by field).
func TestDecisionJSONUnchangedByTheSharedTypes(t *testing.T) {
	type legacyProfile struct {
		Profile     string   `json:"profile"`
		Network     bool     `json:"network"`
		NetworkMode string   `json:"network_mode,omitempty"`
		Exec        []string `json:"exec,omitempty"`
		Read        []string `json:"read,omitempty"`
		Write       []string `json:"write,omitempty"`
		Cache       []string `json:"cache,omitempty"`
	}
	type legacyStep struct {
		Name    string `json:"name"`
		Outcome string `json:"outcome"`
		Detail  string `json:"detail,omitempty"`
	}
	f := newFixture(t)
	mustWrite(t, f.ws+"/go.mod", "module example.com/app\n\ngo 1.22\n")
	mustWrite(t, f.ws+"/package.json", `{"name":"app","version":"1.0.0"}`)
	mustWrite(t, f.out+"/notes.txt", "x\n")
	f.ctx.Sandbox, f.ctx.EgressLists = true, []string{"registries"}
	reqs := []decision.Request{
		{Argv: []string{"ls", "-la"}},
		{Argv: []string{"touch", "x"}, Mode: verdict.ModeConfirm},
		{Argv: []string{"cat", filepath.Join(f.out, "notes.txt")}},
		{Argv: []string{"cp", "go.mod", filepath.Join(f.out, "go.mod")}, Mode: verdict.ModeConfirm},
		{Argv: []string{"go", "build", "./..."}, Mode: verdict.ModeConfirm},
		{Argv: []string{"npm", "install"}, Mode: verdict.ModeConfirm},
		{Argv: []string{"curl", "https://example.com/"}, Network: "host"},
		{Argv: []string{"python3"}, TTY: &decision.Terminal{Rows: 24, Cols: 80}},
		{Argv: []string{"rm", "-rf", "/"}},
	}
	var seen struct{ exec, read, write, cache, mode, detail bool }
	for _, req := range reqs {
		req.Cwd = f.ws
		ex := f.pol.Explain(req, f.ctx)
		d := ex.Decision
		wantSandbox, err := json.Marshal(legacyProfile(d.Sandbox))
		if err != nil {
			t.Fatal(err)
		}
		legacySteps := make([]legacyStep, len(d.Steps))
		for i, s := range d.Steps {
			legacySteps[i] = legacyStep(s)
			seen.detail = seen.detail || s.Detail != ""
		}
		wantSteps, err := json.Marshal(legacySteps)
		if err != nil {
			t.Fatal(err)
		}
		journaled, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var dj, cj map[string]json.RawMessage
		if err := json.Unmarshal(journaled, &dj); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(ex.Request, &cj); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dj["sandbox"], wantSandbox) || !bytes.Equal(cj["sandbox"], wantSandbox) {
			t.Errorf("%q: the sandbox profile's JSON changed:\n decision  %s\n canonical %s\n before    %s", req.Argv, dj["sandbox"], cj["sandbox"], wantSandbox)
		}
		if !bytes.Equal(dj["steps"], wantSteps) {
			t.Errorf("%q: the steps' JSON changed:\n now    %s\n before %s", req.Argv, dj["steps"], wantSteps)
		}
		sb := d.Sandbox
		seen.exec, seen.read, seen.write = seen.exec || len(sb.Exec) > 0, seen.read || len(sb.Read) > 0, seen.write || len(sb.Write) > 0
		seen.cache, seen.mode = seen.cache || len(sb.Cache) > 0, seen.mode || sb.NetworkMode != ""
	}
	if !seen.exec || !seen.read || !seen.write || !seen.cache || !seen.mode || !seen.detail {
		t.Errorf("the requests do not reach every field (exec, read, write, cache, network_mode, a step's detail): %+v", seen)
	}
}
