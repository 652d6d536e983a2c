package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func TestPlansAndStreamsAreBounded(t *testing.T) {
	d := harness.Start(t, harness.Options{Config: "sessions:\n  max_plans: 3\n  max_streams: 2\n"})
	s, _ := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{})
	for i := 0; i < 3; i++ {
		plan(t, d.Client, s.Session.Id, "ls") // open plans count (finished, blocked ones not)
	}
	_, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{SessionId: s.Session.Id, Request: &termdv1.CommandRequest{Argv: []string{"ls"}}})
	if err == nil || !strings.Contains(err.Error(), "sessions.max_plans") {
		t.Fatalf("a fourth plan should be refused naming the cap: %v", err)
	}
	// A new session has room.
	plan(t, d.Client, "", "ls")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var open []termdv1.EventService_StreamEventsClient
	for i := 0; i < 2; i++ {
		st, err := d.Client.Events.StreamEvents(ctx, &termdv1.StreamEventsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Header(); err != nil { // the daemon sends headers once the stream is established
			t.Fatal(err)
		}
		open = append(open, st)
	}
	st, _ := d.Client.Events.StreamEvents(ctx, &termdv1.StreamEventsRequest{})
	if _, err := st.Recv(); err == nil || !strings.Contains(err.Error(), "sessions.max_streams") {
		t.Fatalf("a third stream should be refused naming the cap: %v", err)
	}
}
