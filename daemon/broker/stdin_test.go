package broker

import (
	"context"
	"testing"
	"time"

	"github.com/termd/termd/daemon/broker/sessions"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// A plan's stdin reaches the command on descriptor 0, is let go of once it
// started, and is in the receipt by size and keyed digest (in process, so
// -race sees the journal's lazy writes beside the plan's changes).
func TestStdinInProcess(t *testing.T) {
	r := newRig(t)
	s := r.session(t, agent)
	in := []byte("line one\nline two\n")
	p, err := r.CreatePlan(context.Background(), agent, s, &termdv1.CommandRequest{Argv: []string{"cat"}, Cwd: r.ws, Stdin: in})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []byte
	var receiptID string
	err = r.ExecuteAndWait(ctx, agent, p.Id, s, false, sessions.Each(func(ev *termdv1.Event) error {
		out = append(out, ev.GetOutput().GetData()...)
		if rc := ev.GetReceipt(); rc != nil {
			receiptID = rc.Id
		}
		return nil
	}))
	if err != nil || string(out) != string(in) {
		t.Fatalf("cat with stdin: %v, output %q; want %q", err, out, in)
	}
	r.mu.Lock()
	held := r.plans[p.Id].stdin
	r.unlock()
	if held != nil {
		t.Fatal("the plan still holds its stdin after it ran")
	}
	rc, err := r.store.Get(receiptID)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Stdin == nil || rc.Stdin.Bytes != int64(len(in)) || rc.Stdin.SHA256 != r.Keys.Digest(in) || rc.StdoutDigest != rc.Stdin.SHA256 {
		t.Fatalf("receipt stdin %+v (stdout digest %s)", rc.Stdin, rc.StdoutDigest)
	}
}
