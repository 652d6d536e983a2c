//go:build linux

package cgroup

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A pooled cgroup is reset for another execution (Reset) only when none of
// its v1 groups holds anything of the ended one: a process in the v1 memory
// group alone, one in the v1 pids group alone, or a zombie not reaped yet
// in the v1 pids group (charged, no longer listed) each keep it from being
// reused; once the process is gone and reaped it is reset. So does a tmpfs
// file charged to its v1 memory group until it is removed. Each case reads
// the counters through the descriptors kept open by the reads before.
func TestResetRefusesV1Leftovers(t *testing.T) {
	cg := limitedV1Cgroup(t, "reset")
	if !cg.Reset() {
		t.Fatal("an unused cgroup was not reset")
	}
	for _, c := range []struct {
		name, ctl string
		zombie    bool
	}{{"a process in the v1 memory group", "memory", false}, {"a process in the v1 pids group", "pids", false}, {"a zombie in the v1 pids group", "pids", true}} {
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if err := writeFile(filepath.Join(cg.v1[c.ctl], "cgroup.procs"), strconv.Itoa(cmd.Process.Pid)); err != nil {
			t.Fatal(err)
		}
		if c.zombie {
			_ = cmd.Process.Kill()
			waitZombie(t, cmd.Process.Pid)
		}
		if cg.Reset() {
			t.Errorf("%s: the cgroup was reset for reuse", c.name)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if !cg.Reset() {
			t.Errorf("%s, gone and reaped: the cgroup was not reset", c.name)
		}
	}
	// A tmpfs file written from the v1 memory group stays charged to it
	// after its writer is gone: more than MaxLeftoverMemory is left.
	shm := filepath.Join("/dev/shm", "termd-reset-"+strconv.Itoa(os.Getpid()))
	defer os.Remove(shm)
	cmd := exec.Command("sh", "-c", "sleep 0.2; head -c 4194304 /dev/zero > "+shm)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(cg.v1["memory"], "cgroup.procs"), strconv.Itoa(cmd.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if cg.Reset() {
		t.Error("a cgroup charged with a 4 MiB tmpfs file was reset for reuse")
	}
	os.Remove(shm)
	if !cg.Reset() {
		t.Error("the tmpfs file removed: the cgroup was not reset")
	}
}

// waitZombie waits until process pid has exited (and is not reaped).
func waitZombie(t *testing.T, pid int) {
	t.Helper()
	for range 5000 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		// The state follows the command's name, in parentheses.
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("process %d did not exit", pid)
}

// limitedV1Cgroup makes a pooled cgroup with pids and memory limits, in v1
// groups (a hybrid host's, else the test is skipped), removed when the test
// ends.
func limitedV1Cgroup(t *testing.T, name string) *Cgroup {
	t.Helper()
	if os.Geteuid() != 0 || Probe().CgroupV2 == "" {
		t.Skip("needs cgroups (root)")
	}
	tr := newTree(t)
	if tr.V1Parents["pids"] == "" || tr.V1Parents["memory"] == "" {
		t.Skip("no v1 pids and memory hierarchies here (not a hybrid host)")
	}
	cg, err := tr.makeCgroup(name, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cg.Remove)
	if err := tr.ApplyLimits(cg, Limits{Pids: 64, Memory: 256 << 20}); err != nil {
		t.Fatal(err)
	}
	return cg
}
