package cli_test

import (
	"strings"
	"testing"
)

type sessionJSON struct {
	ID                string `json:"id"`
	Label             string `json:"label"`
	Closed            bool   `json:"closed"`
	ActiveExecutionID string `json:"active_execution_id"`
}

func TestSessionsCreateListClose(t *testing.T) {
	d := start(t)
	s := decode[sessionJSON](t, ok(t, d, "sessions", "create", "--label", "tour", "-o", "json"))
	if s.ID == "" || s.Label != "tour" {
		t.Fatalf("create should return the new session, got %+v", s)
	}
	p := plan(t, d, []string{"--session", s.ID}, "true")
	if p.SessionID != s.ID {
		t.Fatalf("plan --session should plan in that session, got %s", p.SessionID)
	}
	if out := ok(t, d, "sessions"); !strings.Contains(out, s.ID) || !strings.Contains(out, "tour") {
		t.Fatalf("sessions should list it:\n%s", out)
	}
	ok(t, d, "sessions", "close", s.ID)
	list := decode[struct {
		Sessions []sessionJSON `json:"sessions"`
	}](t, ok(t, d, "sessions", "list", "-o", "json"))
	for _, x := range list.Sessions {
		if x.ID == s.ID {
			t.Fatalf("a closed session is listed as open: %+v", x)
		}
	}
	all := decode[struct {
		Sessions []sessionJSON `json:"sessions"`
	}](t, ok(t, d, "sessions", "list", "--all", "-o", "json"))
	found := false
	for _, x := range all.Sessions {
		found = found || (x.ID == s.ID && x.Closed)
	}
	if !found {
		t.Fatalf("sessions --all should show the closed session: %+v", all.Sessions)
	}
	expect(t, d, 1, "sessions", "close", "no-such-session")
}

// Plans from termctl go into a session termctl opened, reused from plan to
// plan; a more recent session another client opened for the same user (an
// MCP bridge, the console) is left alone.
func TestPlansUseTermctlsOwnSession(t *testing.T) {
	d := start(t)
	first := plan(t, d, nil, "ls")
	other := decode[struct {
		ID string `json:"id"`
	}](t, ok(t, d, "sessions", "create", "--label", "mcp: someone", "-o", "json"))
	second := plan(t, d, nil, "pwd")
	if other.ID == "" || second.SessionID != first.SessionID || second.SessionID == other.ID {
		t.Fatalf("plans went to %s then %s (the other client's session is %s)", first.SessionID, second.SessionID, other.ID)
	}
}
