package broker

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/termd/termd/daemon/receiptstore"
)

// Stages of one execution, timed always (a few clock reads per execution)
// and reported as p50/p90 over the last stageWindow executions
// (Broker.StageReport, served at /debug/stages on the TERMD_DEBUG_PPROF
// listener), so where the time goes can be seen without patching code.
const (
	stagePlan          = iota // CreatePlan of the plan that ran, in the daemon: decide, record, journal (0 for plans made otherwise)
	stageCheck                // reserve the plan, re-decide, build the spec (sandbox included)
	stageIntent               // commit the durable intent (overlaps the launcher's start)
	stageIntentEncode         // part of intent: its JSON (receiptstore.WriteTimes)
	stageIntentWait           // part of intent: hand-offs to the store's writer and back
	stageIntentApply          // part of intent: BEGIN and the insert
	stageIntentCommit         // part of intent: COMMIT, the WAL's frames and fsync
	stageLaunch               // part of spawn: cgroup, namespaces, clone, until the launcher waits for its release (~0 without a launcher)
	stageRelease              // part of spawn: from the intent being durable until the command has exec'd
	stageSpawn                // cgroup, namespaces, launcher, release until exec
	stageExit                 // part of run: from the exec until the main process's exit is seen
	stageTeardown             // part of run: kill what is left, reap, read the output to its end
	stageRun                  // the command itself, until it and its output are done
	stageReceipt              // sign and commit the final receipt
	stageReceiptEncode        // part of receipt: encoding and schema check (receipt.Signer.Prepare)
	stageReceiptWait          // part of receipt: hand-offs to the store's writer and back
	stageReceiptApply         // part of receipt: BEGIN, seal (seq, prev_hash, signatures), insert
	stageReceiptCommit        // part of receipt: COMMIT, the WAL's frames and fsync
	stageTotal                // from Execute to the receipt
	stageSettle               // from the receipt to the execution's end being told (final state, events, the sandbox's release joined)
	nStages
)

var stageNames = [nStages]string{"plan", "check", "intent", "intent/encode", "intent/wait", "intent/apply", "intent/commit",
	"launch", "release", "spawn", "exit", "teardown", "run",
	"receipt", "receipt/encode", "receipt/wait", "receipt/apply", "receipt/commit", "total", "settle"}

// write puts where a durable write's time went into the four stages from
// first (stageIntentEncode or stageReceiptEncode) on.
func (t *stageTimes) write(first int, w receiptstore.WriteTimes) {
	t[first], t[first+1], t[first+2], t[first+3] = w.Encode, w.Wait, w.Apply, w.Commit
}

const stageWindow = 512

type stageTimes [nStages]time.Duration

type stageLog struct {
	mu   sync.Mutex
	ring []stageTimes
	next int
}

func (l *stageLog) add(t stageTimes) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ring) < stageWindow {
		l.ring = append(l.ring, t)
		return
	}
	l.ring[l.next] = t
	l.next = (l.next + 1) % stageWindow
}

// StageReport is a table of each stage's p50 and p90 over the last
// executions that ran (spawn failures and refusals are not counted).
func (b *Broker) StageReport() string {
	b.stages.mu.Lock()
	samples := slices.Clone(b.stages.ring)
	b.stages.mu.Unlock()
	var sb strings.Builder
	fmt.Fprintf(&sb, "termd execution stages over the last %d executions (window %d)\n", len(samples), stageWindow)
	fmt.Fprintf(&sb, "%-14s %12s %12s\n", "stage", "p50", "p90")
	if len(samples) == 0 {
		return sb.String()
	}
	col := make([]time.Duration, len(samples))
	for s := range nStages {
		for i, t := range samples {
			col[i] = t[s]
		}
		slices.Sort(col)
		p := func(q int) time.Duration { return col[(len(col)-1)*q/100] }
		fmt.Fprintf(&sb, "%-14s %12v %12v\n", stageNames[s], p(50).Round(time.Microsecond), p(90).Round(time.Microsecond))
	}
	return sb.String()
}
