//go:build linux

package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

var parentSeq atomic.Int64

// newTree makes a Tree under a parent of its own in the v2 hierarchy, as
// the runner's tests make their Runners, removed when the test ends.
func newTree(t *testing.T) *Tree {
	t.Helper()
	host := Probe()
	parent := filepath.Join(host.CgroupV2, fmt.Sprintf("termd-test-%d-%d", os.Getpid(), parentSeq.Add(1)))
	tr, _, err := NewTree(&host, TreeOptions{Parent: parent}, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Errorf("close tree: %v", err)
		}
	})
	return tr
}

// A cgroup keeps the files read at its execution's end (v2 cgroup.events, v1
// cgroup.procs) open from when it was made, a pooled one ahead of its
// execution, so the end reads them without a path walk each; every read says
// what holds now (a v1 member list read twice through one descriptor would
// not), and removing the cgroup leaves nothing open.
func TestCgroupEndFilesKeptOpen(t *testing.T) {
	c := Probe()
	if c.CgroupV2 == "" || os.Geteuid() != 0 {
		t.Skip("needs cgroups (root)")
	}
	tr := newTree(t)
	cg, err := tr.makeCgroup("keep-open", true)
	if err != nil {
		t.Fatal(err)
	}
	// heldIn lists this process's descriptors on files under cg's directories.
	heldIn := func() []string {
		var held []string
		ents, _ := os.ReadDir("/proc/self/fd")
		for _, e := range ents {
			l, err := os.Readlink("/proc/self/fd/" + e.Name())
			if err != nil {
				continue
			}
			if strings.HasPrefix(l, cg.v2+"/") {
				held = append(held, l)
			}
			for _, d := range cg.v1 {
				if strings.HasPrefix(l, d+"/") {
					held = append(held, l)
				}
			}
		}
		return held
	}
	if held := heldIn(); len(held) != 1+len(tr.V1Parents) {
		t.Fatalf("a new cgroup holds %v open, want its cgroup.events and each v1 cgroup.procs", held)
	}
	fd, err := unix.Open(cg.v2, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	err = cmd.Start()
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range cg.v1 {
		if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(cmd.Process.Pid)); err != nil {
			t.Fatal(err)
		}
	}
	if !cg.Populated() || !cg.Populated() {
		t.Error("a cgroup with a running process reads as empty")
	}
	if len(cg.v1) > 0 {
		// Out of the v2 group (into the root), still in the v1 ones: the
		// v1 member lists say it is there.
		if err := writeFile(filepath.Join(c.CgroupV2, "cgroup.procs"), strconv.Itoa(cmd.Process.Pid)); err != nil {
			t.Fatal(err)
		}
		if !cg.Populated() {
			t.Error("a cgroup whose v1 groups hold a process reads as empty")
		}
	}
	if pids := cg.Procs(); len(pids) != 1 || pids[0] != cmd.Process.Pid {
		t.Errorf("members %v, want [%d]", pids, cmd.Process.Pid)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if cg.Populated() || len(cg.Procs()) != 0 {
		t.Error("the cgroup still reads as populated after its only process was reaped")
	}
	cg.Remove()
	if held := heldIn(); len(held) != 0 || exists(cg.v2) {
		t.Errorf("after remove: %v still open, directory left %v", held, exists(cg.v2))
	}
}
