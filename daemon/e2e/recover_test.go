package e2e

import (
	"database/sql"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/daemon/runner/proctree"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	_ "modernc.org/sqlite"
)

// After a kill -9, recovery kills an interrupted execution's process group
// by pid only while that pid still names the process termd started (the
// same start time). Here the commands ended meanwhile and their pids are
// taken to name other process groups, as after pid reuse: one recorded by
// an older termd without a start time, one whose start time differs — both
// unrelated groups must survive — and one that still is the recorded
// process, which must be killed.
func TestRecoveryKillsByPidOnlyTheSameProcess(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	var execs []*termdv1.Execution
	for range 3 {
		ex, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: plan(t, d.Client, "", "sleep", "30").Id})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return alive(int(ex.Execution.Pid)) }, "sleep to start")
		execs = append(execs, ex.Execution)
	}
	d.Kill9()
	for _, ex := range execs { // the commands end; their pids are free for others
		_ = syscall.Kill(-int(ex.Pid), syscall.SIGKILL)
		waitFor(t, func() bool { return !alive(int(ex.Pid)) }, "the command to end")
	}
	legacy, reused, same := groupLeader(t), groupLeader(t), groupLeader(t)
	db, err := sql.Open("sqlite", filepath.Join(d.StateDir, "receipts.db"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixNano()
	rows := []struct {
		query string
		args  []any
	}{
		{`INSERT INTO intent_spawns(execution_id, pid, pgid, cgroup_path, at_ns) VALUES (?,?,?,'',?)`,
			[]any{execs[0].Id, legacy, legacy, now}}, // as an older termd wrote it
		{`INSERT INTO intent_spawns(execution_id, pid, pgid, cgroup_path, at_ns, start_ticks) VALUES (?,?,?,'',?,?)`,
			[]any{execs[1].Id, reused, reused, now, int64(startTicks(t, reused) + 1)}},
		{`INSERT INTO intent_spawns(execution_id, pid, pgid, cgroup_path, at_ns, start_ticks) VALUES (?,?,?,'',?,?)`,
			[]any{execs[2].Id, same, same, now, int64(startTicks(t, same))}},
	}
	for _, r := range rows {
		if _, err := db.Exec(r.query, r.args...); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	d.Restart() // recovery is done before termd serves
	waitFor(t, func() bool { return !alive(same) }, "the process still recorded to be killed")
	if !alive(legacy) {
		t.Error("recovery killed by pid an intent without a recorded start time (the pid may have been reused)")
	}
	if !alive(reused) {
		t.Error("recovery killed a process group whose leader has the recorded pid but another start time")
	}
	if !strings.Contains(d.Log(), "no recorded start time") {
		t.Errorf("the log should say why the pid without a start time was not killed:\n%s", d.Log())
	}
	rs, err := d.Client.Receipts.ListReceipts(ctxT(t), &termdv1.ListReceiptsRequest{Status: "outcome_unknown"})
	if err != nil || len(rs.Receipts) != len(execs) {
		t.Fatalf("want %d outcome_unknown receipts; got %v %v", len(execs), rs, err)
	}
}

// groupLeader starts a process that leads its own session and process group,
// outside termd.
func groupLeader(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

func startTicks(t *testing.T, pid int) uint64 {
	t.Helper()
	pi, ok := proctree.Read(pid)
	if !ok || pi.Start == 0 {
		t.Fatalf("no start time for pid %d", pid)
	}
	return pi.Start
}
