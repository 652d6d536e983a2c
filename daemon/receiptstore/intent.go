package receiptstore

import (
	"time"

	"github.com/termd/termd/receipt"
)

// Intent is the durable record written before a process is spawned. It holds
// enough to build an outcome_unknown receipt and to find leftovers to kill if
// the daemon dies before the final receipt is appended.
type Intent struct {
	ExecutionID string `json:"execution_id"`
	PlanID      string `json:"plan_id"`
	SessionID   string `json:"session_id"`
	Pid         int    `json:"pid,omitempty"`
	Pgid        int    `json:"pgid,omitempty"`
	// PidStart is Pid's start time (clock ticks since boot; 0 = not known,
	// as in a store written before it was recorded): recovery kills by pid
	// only a process that still has this start time.
	PidStart   uint64    `json:"pid_start,omitempty"`
	CgroupPath string    `json:"cgroup_path,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	// Receipt is the pre-filled draft (command, policy, principals, ...).
	Receipt *receipt.Receipt `json:"receipt,omitempty"`
}

// OutcomeUnknown builds the outcome_unknown receipt for an intent that was
// never closed, e.g. after a daemon crash. The caller appends it.
func (in Intent) OutcomeUnknown(now time.Time, detail string) *receipt.Receipt {
	var r *receipt.Receipt
	if in.Receipt != nil {
		r = in.Receipt.Clone()
	} else {
		r = &receipt.Receipt{}
	}
	r.ID, r.Seq, r.PrevHash = "", 0, ""
	r.Signature, r.SignatureEd25519, r.KeyID = "", "", ""
	r.ExecutionID, r.PlanID, r.SessionID = in.ExecutionID, in.PlanID, in.SessionID
	if !in.StartedAt.IsZero() {
		r.StartedAt = in.StartedAt
	}
	if r.StartedAt.IsZero() {
		r.StartedAt = now
	}
	r.FinishedAt = now
	r.DurationMs = 0 // the monotonic clock did not survive the crash
	r.Status = receipt.StatusOutcomeUnknown
	r.ExitCode = nil
	r.Signal = ""
	if detail == "" {
		detail = "daemon stopped before the execution finished"
	}
	r.Detail = detail
	return r
}
