package events

import (
	"fmt"
	"runtime"
	"testing"

	termdv1 "github.com/termd/termd/proto/termd/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// planEvent fills an event with a plan shaped as a `pwd` plan's: ids,
// the request, a decision of short strings and a sandbox profile,
// timestamps (about 1 KB encoded).
func planEvent(i int) func(e *termdv1.Event) {
	return func(e *termdv1.Event) {
		now := timestamppb.Now()
		sb := &termdv1.SandboxProfile{}
		e.Payload = &termdv1.Event_Plan{Plan: &termdv1.Plan{
			Id:        fmt.Sprintf("pln_%032d", i),
			SessionId: "ses_0123456789abcdef0123456789abcdef",
			State:     termdv1.PlanState_PLAN_STATE_PLANNED,
			Request:   &termdv1.CommandRequest{Argv: []string{"pwd"}, Cwd: "/work/project", Env: map[string]string{"LANG": "C.UTF-8"}},
			Decision: &termdv1.Decision{
				Verdict: termdv1.Verdict_VERDICT_ALLOW, Reasons: []string{"pwd prints the working directory", "read-only"},
				Rules: []string{"builtin:read-only", "tool:pwd"}, PolicyVersion: "sha256:0123456789abcdef", RequestHash: "sha256:fedcba9876543210fedcba9876543210",
				Argv: []string{"pwd"}, ResolvedPath: "/usr/bin/pwd", BinarySha256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
				Cwd: "/work/project", Env: map[string]string{"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}, ReadOnly: true, TimeoutSeconds: 60,
				Writes: []string{"/tmp"}, ExecArgv: []string{"/usr/bin/pwd"}, Sandbox: sb,
			},
			Preview:   &termdv1.Preview{Program: "/usr/bin/pwd", Summary: "print the working directory", ReadOnly: true, Sandbox: sb},
			Limits:    &termdv1.Limits{TimeoutSeconds: 60, OutputBytes: 1 << 20, MemoryBytes: 1 << 30, Pids: 256, GraceSeconds: 5},
			Requester: &termdv1.Principal{Uid: 1000, Gid: 1000, Name: "agent", Role: termdv1.Role_ROLE_AGENT},
			CreatedAt: now, UpdatedAt: now, ExpiresAt: now, NextStep: "terminal_execute with plan_id",
		}}
	}
}

// The rings' byte budgets bound the heap the bus holds: a bus given 4 MiB
// a ring, after many more plan events than fit, holds at most about that
// (the rings share their events), not the twice or more it held when an
// event counted as its encoded length.
func TestRingBytesBoundTheHeap(t *testing.T) {
	const budget = 4 << 20
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	h0 := heap()
	b := New(Options{SessionRingEvents: 1 << 20, SessionRingBytes: budget, GlobalRingEvents: 1 << 20, GlobalRingBytes: budget})
	for i := range 20000 {
		b.Publish("s", termdv1.EventKind_EVENT_KIND_PLAN_CREATED, planEvent(i))
	}
	held := heap() - h0
	b.mu.Lock()
	events, accounted := b.global.n, b.global.bytes
	b.mu.Unlock()
	t.Logf("%d events held, %d bytes accounted, %d bytes of heap", events, accounted, held)
	if held > budget*9/8 {
		t.Errorf("the bus holds %.1f MiB of heap for rings of %d MiB (%d events of %d published, %d bytes accounted)", float64(held)/(1<<20), budget>>20, events, 20000, accounted)
	}
	runtime.KeepAlive(b)
}

// A closed session's tail is bounded by bytes as well as by count: a
// session that ended on a flood of output keeps its last events up to
// 64 KiB (and its newest, SESSION_CLOSED), not sixteen 100 KiB outputs,
// so 1,024 remembered closed sessions cannot hold gigabytes. A subscriber
// resuming from the start is told what it missed.
func TestClosedSessionTailBoundedByBytes(t *testing.T) {
	ctx := testCtx(t)
	b := New(Options{})
	for range 20 {
		b.Publish("s", kOutput, output(100<<10))
	}
	b.Publish("s", kClosed, nil)
	b.CloseSession("s")
	b.mu.Lock()
	held, n := b.sessions["s"].ring.bytes, b.sessions["s"].ring.n
	b.mu.Unlock()
	if held > 64<<10 {
		t.Errorf("the closed session holds %d events, %d KiB; want at most 64 KiB", n, held>>10)
	}
	s, err := b.Subscribe("s", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantLagged(t, next(t, ctx, s), 0, uint64(21-n))
	if ev := next(t, ctx, s); ev.Kind != kClosed || ev.Seq != 21 {
		t.Fatalf("after the lag got %s (seq %d), want SESSION_CLOSED (seq 21)", ev.Kind, ev.Seq)
	}
}
