package broker

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// followBatches runs plan p with ExecuteAndWait and returns the batches its
// events came in (kinds), and their output; each batch is given to seen as
// it comes (it may cancel the execution).
func followBatches(t *testing.T, r *rig, p *termdv1.Plan, o FollowOptions, seen func(evs []*termdv1.Event)) (batches [][]termdv1.EventKind, out string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := r.ExecuteAndFollow(ctx, agent, p.Id, p.SessionId, o, func(evs []*termdv1.Event) error {
		var kinds []termdv1.EventKind
		for _, ev := range evs {
			kinds = append(kinds, ev.Kind)
			out += string(ev.GetOutput().GetData())
		}
		batches = append(batches, kinds)
		if seen != nil {
			seen(evs)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ExecuteAndWait: %v (batches so far %v)", err, batches)
	}
	return batches, out
}

// A short command's whole stream (started, its output, finished, the
// receipt) is sent together, in order: one write to the client instead of
// one per event, and none while the command runs.
func TestShortCommandStreamsInOneBatch(t *testing.T) {
	r := newRig(t)
	r.linger = time.Hour // only the end sends: what a short command sees with Linger
	s := r.session(t, agent)
	batches, out := followBatches(t, r, r.plan(t, agent, s, "pwd"), FollowOptions{}, nil)
	want := []termdv1.EventKind{termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED, termdv1.EventKind_EVENT_KIND_OUTPUT,
		termdv1.EventKind_EVENT_KIND_FINISHED, termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED}
	if len(batches) != 1 || !slices.Equal(batches[0], want) {
		t.Fatalf("pwd's events came in batches %v, want one: %v", batches, want)
	}
	if out != r.ws+"\n" {
		t.Fatalf("pwd's output %q, want %q", out, r.ws+"\n")
	}
}

// A live stream (a client relaying progress as it happens) holds nothing:
// each of a short command's events is sent as it is published, whatever
// the linger.
func TestLiveStreamSendsEachEvent(t *testing.T) {
	r := newRig(t)
	r.linger = time.Hour
	s := r.session(t, agent)
	batches, out := followBatches(t, r, r.plan(t, agent, s, "pwd"), FollowOptions{Live: true}, nil)
	if len(batches) != 4 || len(batches[0]) != 1 || batches[0][0] != termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED {
		t.Fatalf("a live stream of pwd came in batches %v, want each event alone, the start first", batches)
	}
	if out != r.ws+"\n" {
		t.Fatalf("pwd's output %q, want %q", out, r.ws+"\n")
	}
}

// A long command's events do not wait for its end: what was held goes out
// after the linger (its start), or at once when its output passes
// LingerBytes, while the command still runs.
func TestLongCommandStreamsWhileRunning(t *testing.T) {
	r := newRig(t)
	s := r.session(t, agent)
	big := filepath.Join(r.ws, "big.txt")
	if err := os.WriteFile(big, []byte(strings.Repeat("y\n", 50000)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		linger time.Duration
		argv   []string
		first  termdv1.EventKind // the last kind of the first batch
	}{
		{"start, after the linger", 10 * time.Millisecond, []string{"sleep", "600"}, termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED},
		{"output past LingerBytes", time.Hour, []string{"tail", "-c", "100000", "-f", big}, termdv1.EventKind_EVENT_KIND_OUTPUT},
	} {
		r.linger = c.linger
		p := r.plan(t, agent, s, c.argv...)
		first := true
		batches, _ := followBatches(t, r, p, FollowOptions{}, func(evs []*termdv1.Event) {
			if first {
				first = false
				// Only a batch sent while it runs can end it.
				if _, err := r.CancelExecution(context.Background(), agent, evs[0].GetExecution().GetId()); err != nil {
					t.Errorf("%s: cancel: %v", c.name, err)
				}
			}
		})
		if kinds := batches[0]; len(batches) < 2 || kinds[len(kinds)-1] != c.first || kinds[0] != termdv1.EventKind_EVENT_KIND_EXECUTION_STARTED {
			t.Errorf("%s: batches %v: want a first one ending with %v before the end", c.name, batches, c.first)
		}
	}
}
