// Package stages names the stages of one execution and keeps their
// durations: the broker times every execution (a few clock reads each) and
// hands the times to a Recorder the daemon injects (Deps.Stages); Log is the
// recorder termd uses, reporting each stage's p50 and p90 over the last
// Window executions (served at /debug/stages on the TERMD_DEBUG_PPROF
// listener), so where the time goes can be seen without patching code.
//
// It owns the stage names, their times and the report. Imports: only the
// standard library and daemon/receiptstore (the durable writes' times).
package stages

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/termd/termd/daemon/receiptstore"
)

// Stage is one stage of an execution.
type Stage int

const (
	Plan          Stage = iota // CreatePlan of the plan that ran, in the daemon: decide, record, journal (0 for plans made otherwise)
	Check                      // reserve the plan, re-decide, build the spec (sandbox included)
	Intent                     // commit the durable intent (overlaps the launcher's start)
	IntentEncode               // part of intent: its JSON (receiptstore.WriteTimes)
	IntentWait                 // part of intent: hand-offs to the store's writer and back
	IntentApply                // part of intent: BEGIN and the insert
	IntentCommit               // part of intent: COMMIT, the WAL's frames and fsync
	Launch                     // part of spawn: cgroup, namespaces, clone, until the launcher waits for its release (~0 without a launcher)
	Release                    // part of spawn: from the intent being durable until the command has exec'd
	Spawn                      // cgroup, namespaces, launcher, release until exec
	Exit                       // part of run: from the exec until the main process's exit is seen
	Teardown                   // part of run: kill what is left, reap, read the output to its end
	Run                        // the command itself, until it and its output are done
	Receipt                    // sign and commit the final receipt
	ReceiptEncode              // part of receipt: encoding and schema check (receipt.Signer.Prepare)
	ReceiptWait                // part of receipt: hand-offs to the store's writer and back
	ReceiptApply               // part of receipt: BEGIN, seal (seq, prev_hash, signatures), insert
	ReceiptCommit              // part of receipt: COMMIT, the WAL's frames and fsync
	Total                      // from Execute to the receipt
	Settle                     // from the receipt to the execution's end being told (final state, events, the sandbox's release joined)
	N                          // the number of stages
)

var names = [N]string{"plan", "check", "intent", "intent/encode", "intent/wait", "intent/apply", "intent/commit",
	"launch", "release", "spawn", "exit", "teardown", "run",
	"receipt", "receipt/encode", "receipt/wait", "receipt/apply", "receipt/commit", "total", "settle"}

// String is the stage's name in the report.
func (s Stage) String() string {
	if s < 0 || s >= N {
		return fmt.Sprintf("stage(%d)", int(s))
	}
	return names[s]
}

// Times are the durations of one execution's stages.
type Times [N]time.Duration

// Write puts where a durable write's time went into the four stages from
// first (IntentEncode or ReceiptEncode) on.
func (t *Times) Write(first Stage, w receiptstore.WriteTimes) {
	t[first], t[first+1], t[first+2], t[first+3] = w.Encode, w.Wait, w.Apply, w.Commit
}

// Recorder receives the stage times of each execution that ran (spawn
// failures and refusals are not given). Record is called once per
// execution, from the goroutine that finished it.
type Recorder interface {
	Record(Times)
}

// Window is how many executions a Log reports on.
const Window = 512

// Log is a Recorder that keeps the last Window executions' times. The zero
// value is ready to use.
type Log struct {
	mu   sync.Mutex
	ring []Times
	next int
}

// Record keeps t, forgetting the oldest once Window are kept.
func (l *Log) Record(t Times) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ring) < Window {
		l.ring = append(l.ring, t)
		return
	}
	l.ring[l.next] = t
	l.next = (l.next + 1) % Window
}

// Report is a table of each stage's p50 and p90 over the executions kept.
func (l *Log) Report() string {
	l.mu.Lock()
	samples := slices.Clone(l.ring)
	l.mu.Unlock()
	var sb strings.Builder
	fmt.Fprintf(&sb, "termd execution stages over the last %d executions (window %d)\n", len(samples), Window)
	fmt.Fprintf(&sb, "%-14s %12s %12s\n", "stage", "p50", "p90")
	if len(samples) == 0 {
		return sb.String()
	}
	col := make([]time.Duration, len(samples))
	for s := range N {
		for i, t := range samples {
			col[i] = t[s]
		}
		slices.Sort(col)
		p := func(q int) time.Duration { return col[(len(col)-1)*q/100] }
		fmt.Fprintf(&sb, "%-14s %12v %12v\n", s, p(50).Round(time.Microsecond), p(90).Round(time.Microsecond))
	}
	return sb.String()
}
