package wire

import (
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/receiptstore"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func requestContext(t *testing.T) RequestContext {
	t.Helper()
	keys, err := receiptstore.LoadOrCreateKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return RequestContext{
		Caller:      &termdv1.Principal{Name: "agent", Role: termdv1.Role_ROLE_AGENT, Uid: 1000},
		DefaultMode: policy.ModeConfirm, Workspaces: []string{"/srv/ws", "/srv/other"},
		MaxRequestBytes: 64, MaxStdinBytes: 8, Digest: keys.Digest,
	}
}

// A request is refused before anything is decided when it is empty, asks
// for both forms, is too large, carries too much stdin or stdin on a
// terminal, or asks for a mode only operators may; each error says what to
// do.
func TestRequestRefusals(t *testing.T) {
	c := requestContext(t)
	noStdin := c
	noStdin.MaxStdinBytes = 0
	cases := []struct {
		name string
		c    RequestContext
		r    *termdv1.CommandRequest
		kind errdefs.Kind
		say  string
	}{
		{"nil", c, nil, errdefs.KindInvalid, "request is empty"},
		{"both", c, &termdv1.CommandRequest{Argv: []string{"ls"}, Command: "ls"}, errdefs.KindInvalid, "either argv or command"},
		{"blank", c, &termdv1.CommandRequest{Command: "  "}, errdefs.KindInvalid, "nothing to run"},
		{"large", c, &termdv1.CommandRequest{Argv: []string{"echo", strings.Repeat("x", 61)}}, errdefs.KindInvalid, "plans.max_request_bytes, 64"},
		{"large env", c, &termdv1.CommandRequest{Argv: []string{"env"}, Env: map[string]string{"K": strings.Repeat("v", 61)}}, errdefs.KindInvalid, "put long input in a file"},
		{"stdin", c, &termdv1.CommandRequest{Argv: []string{"cat"}, Stdin: []byte("123456789")}, errdefs.KindInvalid, "plans.max_stdin_bytes, 8"},
		{"no stdin", noStdin, &termdv1.CommandRequest{Argv: []string{"cat"}, Stdin: []byte("1")}, errdefs.KindInvalid, "max_stdin_bytes is 0"},
		{"stdin on tty", c, &termdv1.CommandRequest{Argv: []string{"cat"}, Stdin: []byte("1"), Tty: &termdv1.TerminalOptions{}}, errdefs.KindInvalid, "drop the tty or the stdin"},
		{"trusted agent", c, &termdv1.CommandRequest{Argv: []string{"ls"}, Mode: termdv1.Mode_MODE_TRUSTED}, errdefs.KindPermission, "only operators"},
		{"bad mode", c, &termdv1.CommandRequest{Argv: []string{"ls"}, Mode: termdv1.Mode(99)}, errdefs.KindInvalid, "inspect, confirm, trusted"},
	}
	for _, tc := range cases {
		_, err := Request(tc.r, tc.c)
		if err == nil || errdefs.KindOf(err) != tc.kind || !strings.Contains(err.Error(), tc.say) {
			t.Errorf("%s: error %v (kind %v), want kind %v saying %q", tc.name, err, errdefs.KindOf(err), tc.kind, tc.say)
		}
	}
}

// The canonical request: cwd in the first workspace, the policy's default
// mode unless one is asked for (an operator may loosen it), stdin by size and
// keyed digest, a terminal clamped to what the policy can say.
func TestRequestCanonicalForm(t *testing.T) {
	c := requestContext(t)
	req, err := Request(&termdv1.CommandRequest{Argv: []string{"cat"}, Cwd: "src", Stdin: []byte("in"), TimeoutSeconds: 3, Credentials: []string{"gh"}}, c)
	if err != nil {
		t.Fatal(err)
	}
	if req.Cwd != "/srv/ws/src" || req.Mode != policy.ModeConfirm || req.Timeout != 3*time.Second || req.Credentials[0] != "gh" {
		t.Errorf("request %+v", req)
	}
	if req.Stdin == nil || req.Stdin.Bytes != 2 || req.Stdin.SHA256 != c.Digest([]byte("in")) {
		t.Errorf("stdin %+v", req.Stdin)
	}
	if req, _ = Request(&termdv1.CommandRequest{Command: "ls"}, c); req.Cwd != "/srv/ws" || req.Stdin != nil {
		t.Errorf("no cwd: %q, stdin %+v", req.Cwd, req.Stdin)
	}
	op := c
	op.Caller = &termdv1.Principal{Name: "root", Role: termdv1.Role_ROLE_OPERATOR}
	req, err = Request(&termdv1.CommandRequest{Argv: []string{"ls"}, Cwd: "/tmp", Mode: termdv1.Mode_MODE_TRUSTED, Tty: &termdv1.TerminalOptions{Rows: 70000, Cols: 80, IdleTimeoutSeconds: 5}}, op)
	if err != nil || req.Mode != policy.ModeTrusted || req.Cwd != "/tmp" {
		t.Fatalf("operator: %+v, %v", req, err)
	}
	if req.TTY == nil || req.TTY.Rows != 65535 || req.TTY.Cols != 80 || req.TTY.Idle != 5*time.Second {
		t.Errorf("terminal %+v", req.TTY)
	}
	r := &termdv1.CommandRequest{Argv: []string{"ab", "c"}, Cwd: "d", Env: map[string]string{"e": "fg"}, Credentials: []string{"h"}, Stdin: []byte("ij")}
	if RequestBytes(r) != 8 || HeldBytes(r) != 10 {
		t.Errorf("request bytes %d, held %d; want 8 and 10", RequestBytes(r), HeldBytes(r))
	}
}

// A replan gets the plan's stdin back while the plan holds it, and an
// agent's replan of a plan in a looser mode than the default is decided
// in the default; the plan's own request is never changed.
func TestReplan(t *testing.T) {
	c := requestContext(t)
	op := &termdv1.Principal{Name: "root", Role: termdv1.Role_ROLE_OPERATOR}
	orig := &termdv1.CommandRequest{Argv: []string{"cat"}, Mode: termdv1.Mode_MODE_TRUSTED}
	req, err := Request(orig, RequestContext{Caller: op, DefaultMode: policy.ModeConfirm, Workspaces: c.Workspaces, MaxRequestBytes: 64, MaxStdinBytes: 8, Digest: c.Digest})
	if err != nil {
		t.Fatal(err)
	}
	req.Stdin = &policy.Stdin{Bytes: 2}
	if _, _, err := Replan(op, "p1", req, orig, nil, policy.ModeConfirm); errdefs.KindOf(err) != errdefs.KindPrecondition || !strings.Contains(err.Error(), "plan the command again with its input") {
		t.Errorf("stdin let go: %v", err)
	}
	got, r, err := Replan(c.Caller, "p1", req, orig, []byte("in"), policy.ModeConfirm)
	if err != nil || string(r.Stdin) != "in" || got.Mode != policy.ModeConfirm || r.Mode != termdv1.Mode_MODE_CONFIRM {
		t.Errorf("agent replan: %+v, %v, %v", got, r, err)
	}
	if orig.Stdin != nil || orig.Mode != termdv1.Mode_MODE_TRUSTED || req.Mode != policy.ModeTrusted {
		t.Errorf("the plan's request changed: %v, %+v", orig, req)
	}
	if got, r, err = Replan(op, "p1", req, orig, []byte("in"), policy.ModeConfirm); err != nil || got.Mode != policy.ModeTrusted || r.Mode != termdv1.Mode_MODE_TRUSTED {
		t.Errorf("operator replan: %+v, %v, %v", got, r, err)
	}
	req.Stdin = nil
	if _, r, _ = Replan(op, "p1", req, orig, nil, policy.ModeConfirm); r != orig {
		t.Errorf("nothing to change, yet a copy")
	}
}
