package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Tree is the cgroup parent tree of a runner: the v2 directory under which
// every execution's cgroup is made and, on hybrid hosts, the v1 pids and
// memory directories beside it. Parent "" means no cgroups: executions are
// bounded without them.
type Tree struct {
	Parent    string            // abs v2 parent dir, "" = no cgroups
	ParentRel string            // Parent relative to the v2 mount (as in /proc/PID/cgroup)
	V1Parents map[string]string // controller -> abs parent dir
	V1Rel     map[string]string // controller -> parent relative to its mount
	OwnV1     map[string]string // controller -> our own abs v1 cgroup dir
	V1Roots   map[string]string // controller -> its hierarchy's root (where a spawning thread goes when OwnV1 is gone)
	created   []string          // parent dirs we made (removed by Close)
}

// TreeOptions say where a Tree goes (see runner.Options).
type TreeOptions struct {
	Parent    string // "" = <v2 mount><our own cgroup>/termd
	NoCgroups bool
	NoV1      bool
}

// NewTree creates the parent directories the runner needs (process self is
// termd) and enables the pids and memory controllers for them where v2 has
// them. What cannot be used is added to host.CgroupMissing (and host's
// mounts cleared when no cgroup can be had); leafMove says whether termd
// moved itself into a leaf cgroup, or why no cgroups are used, for the
// daemon's log. Only an explicit o.Parent that cannot be made is an error:
// without one, executions are bounded without cgroups.
func NewTree(host *Host, o TreeOptions, self int) (t *Tree, leafMove string, err error) {
	t = &Tree{V1Parents: map[string]string{}, V1Rel: map[string]string{}, OwnV1: map[string]string{}, V1Roots: map[string]string{}}
	mount := host.CgroupV2
	if o.Parent != "" && mount == "" {
		// An explicit parent need not be below termd's own cgroup, which
		// the probe found unusable: any writable v2 mount will do.
		if ms := cgroupMounts(); !ms.v2ro {
			mount = ms.v2
		}
	}
	if o.NoCgroups || mount == "" {
		return t, "", nil
	}
	own := ownCgroup("")
	parent := o.Parent
	if parent == "" {
		// On a hybrid host too: a v2 hierarchy that holds pids or memory
		// (controllers v1 does not) gives limits only from a leaf.
		leafMove = moveToLeaf(mount, own.V2, self)
		parent = filepath.Join(mount, own.V2, "termd")
	}
	parent = filepath.Clean(parent)
	rel, err := filepath.Rel(mount, parent)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return nil, "", fmt.Errorf("cgroup parent %s is not below the cgroup v2 mount %s", parent, mount)
	}
	if err := t.mkParent(mount, parent); err != nil {
		if o.Parent != "" {
			return nil, "", err
		}
		// Never every spawn failing: without a parent of its own, termd
		// bounds executions without cgroups and says so.
		host.CgroupMissing = append(host.CgroupMissing, fmt.Sprintf("%v: executions get no cgroup of their own (process groups, /proc scans and the subreaper bound them) and no pids/memory limits; %s", err, delegateFix))
		host.CgroupV2, host.V1Pids, host.V1Memory = "", "", ""
		return t, leafMove, nil
	}
	if o.Parent == "" && unix.Access(parent, unix.W_OK|unix.X_OK) != nil {
		// Another user's termd made the shared parent (an unprivileged termd
		// beside a root one in the same cgroup): no cgroups rather than
		// failing every spawn.
		return t, "cgroup parent " + parent + " belongs to another user: executions use the process-group fallback", nil
	}
	host.CgroupV2 = mount
	t.Parent = parent
	t.ParentRel = "/" + rel
	if !o.NoV1 {
		t.makeV1Parents(host, own)
	}
	return t, leafMove, nil
}

// makeV1Parents makes the v1 pids and memory parents beside the v2 one
// (filepath.Base(t.Parent) in termd's own v1 cgroups); one that cannot be
// used is said in host.CgroupMissing and cleared from host.
func (t *Tree) makeV1Parents(host *Host, own Paths) {
	for _, ctl := range []string{"pids", "memory"} {
		m := map[string]string{"pids": host.V1Pids, "memory": host.V1Memory}[ctl]
		if m == "" || own.V1[ctl] == "" {
			continue
		}
		ownDir := filepath.Join(m, own.V1[ctl])
		d := filepath.Join(ownDir, filepath.Base(t.Parent))
		err := t.mkdirTracked(d)
		if err == nil {
			// It may have been there already, on a hierarchy this
			// termd cannot write (a container's read-only v1 mount
			// shows the host's directories).
			err = writableDir(d)
		}
		if err != nil {
			host.CgroupMissing = append(host.CgroupMissing, fmt.Sprintf("%s limits are not enforced: the v1 %s cgroup %s cannot be used (%v); %s", ctl, ctl, d, err, delegateFix))
			if ctl == "pids" {
				host.V1Pids = ""
			} else {
				host.V1Memory = ""
			}
			continue // v1 limits are optional
		}
		t.OwnV1[ctl] = ownDir
		t.V1Roots[ctl] = m
		t.V1Parents[ctl] = d
		t.V1Rel[ctl] = filepath.Join(own.V1[ctl], filepath.Base(t.Parent))
	}
}

// moveToLeaf makes limits possible on a pure cgroup v2 host where termd owns
// a delegated cgroup (systemd Delegate=yes): v2 will not hand controllers to
// children of a cgroup that has processes of its own, so when termd is the
// only process there and pids/memory are available, it moves itself into a
// "daemon" leaf and enables the controllers for its executions' parent. It
// reports what it did; on any failure it leaves things as they were.
func moveToLeaf(mount, own string, self int) string {
	if own == "/" || own == "" {
		return ""
	}
	dir := filepath.Join(mount, own)
	want := false
	for _, c := range readControllers(filepath.Join(dir, "cgroup.controllers")) {
		want = want || c == "pids" || c == "memory"
	}
	procs := readPids(filepath.Join(dir, "cgroup.procs"))
	if !want || len(procs) != 1 || procs[0] != self {
		return ""
	}
	leaf := filepath.Join(dir, "daemon")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "not moved: " + err.Error()
	}
	if err := writeFile(filepath.Join(leaf, "cgroup.procs"), fmt.Sprint(self)); err != nil {
		_ = os.Remove(leaf)
		return "not moved: " + err.Error()
	}
	enableControllers(dir)
	return "moved termd into " + leaf + " so executions can have pids/memory limits"
}

// mkParent creates parent (and missing ancestors) and enables pids/memory in
// each level's subtree_control where available (best effort: a cgroup that has
// processes of its own cannot delegate controllers in v2).
func (t *Tree) mkParent(mount, parent string) error {
	rel, _ := filepath.Rel(mount, parent)
	cur := mount
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		enableControllers(cur)
		cur = filepath.Join(cur, part)
		if err := t.mkdirTracked(cur); err != nil {
			return fmt.Errorf("create cgroup parent: %w", err)
		}
	}
	enableControllers(cur)
	return nil
}

func enableControllers(dir string) {
	for _, c := range readControllers(filepath.Join(dir, "cgroup.controllers")) {
		if c == "pids" || c == "memory" {
			_ = writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+c)
		}
	}
}

func (t *Tree) mkdirTracked(d string) error {
	err := os.Mkdir(d, 0o755)
	if err == nil {
		t.created = append(t.created, d)
		return nil
	}
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	return err
}

// Close removes the parent directories this Tree created, when empty.
func (t *Tree) Close() error {
	var first error
	for i := len(t.created) - 1; i >= 0; i-- {
		if err := os.Remove(t.created[i]); err != nil && !errors.Is(err, os.ErrNotExist) && first == nil {
			first = err
		}
	}
	t.created = nil
	return first
}

// Make makes a cgroup for a pool, ahead of its execution: the v2 directory
// and one in every v1 hierarchy the Tree uses (its limits are not known
// yet); joined: for a process that joins its v1 cgroups after its fork
// (JoinV1). No limit is written.
func (t *Tree) Make(name string, joined bool) (*Cgroup, error) {
	cg, err := t.makeCgroup(name, true)
	if err != nil {
		return nil, err
	}
	cg.joined = joined
	return cg, nil
}

// MarkJoined readies cg, made or reset for a spawn forked into it, for a
// process that joins its v1 cgroups after its fork instead (Make's joined).
func (cg *Cgroup) MarkJoined() { cg.joined = true }

// Create makes the cgroups for one execution and writes its limits;
// joined: for a process that joins its v1 cgroups after its fork (JoinV1).
func (t *Tree) Create(name string, lim Limits, joined bool) (*Cgroup, error) {
	cg, err := t.makeCgroup(name, false)
	if err != nil {
		return nil, err
	}
	cg.joined = joined
	if err := t.ApplyLimits(cg, lim); err != nil {
		cg.Remove()
		return nil, err
	}
	return cg, nil
}

// makeCgroup makes the v2 directory of one execution (and, with allV1, a
// directory in every v1 hierarchy the Tree uses, for a pooled cgroup whose
// limits are not known yet). No limit is written.
func (t *Tree) makeCgroup(name string, allV1 bool) (*Cgroup, error) {
	cg := &Cgroup{v1: map[string]string{}, written: map[string]string{}}
	dir := filepath.Join(t.Parent, name)
	if err := freshDir(dir); err != nil {
		return nil, err
	}
	cg.v2 = dir
	cg.keepOpen(filepath.Join(dir, "cgroup.events"), false)
	cg.kill = exists(filepath.Join(dir, "cgroup.kill"))
	cg.freeze = exists(filepath.Join(dir, "cgroup.freeze"))
	cg.controllers = readControllers(filepath.Join(dir, "cgroup.controllers"))
	if allV1 {
		for ctl, p := range t.V1Parents {
			d := filepath.Join(p, name)
			if err := freshDir(d); err != nil {
				cg.Remove()
				return nil, err
			}
			cg.v1[ctl] = d
			cg.keepOpen(filepath.Join(d, "cgroup.procs"), true)
		}
	}
	return cg, nil
}

// ApplyLimits writes lim into cg (v2 where it has the controller, else v1,
// making the v1 directory when it is missing and removing v1 directories
// lim does not need) and records them in
// cg.applied. A value cg already holds is not written again, so a pooled
// cgroup whose limits were written ahead costs nothing here.
func (t *Tree) ApplyLimits(cg *Cgroup, lim Limits) error {
	cg.applied, cg.pidsMax = nil, 0
	if err := cg.applyV2(lim); err != nil {
		return err
	}
	return t.applyV1(cg, lim)
}

// has says whether cg's v2 cgroup has controller c.
func (cg *Cgroup) has(c string) bool { return slices.Contains(cg.controllers, c) }

// applyV2 writes lim's limits for the controllers v2 has.
func (cg *Cgroup) applyV2(lim Limits) error {
	dir := cg.v2
	if cg.has("pids") {
		v := "max"
		if lim.Pids > 0 {
			v = strconv.FormatInt(lim.Pids, 10)
			cg.applied = append(cg.applied, "v2:pids.max="+v)
		}
		if err := cg.set(filepath.Join(dir, "pids.max"), v); err != nil {
			return err
		}
	}
	if cg.has("memory") {
		v, swap := "max", "max"
		if lim.Memory > 0 {
			// Without swap.max 0 the limit could be dodged by swapping.
			v, swap = strconv.FormatInt(lim.Memory, 10), "0"
			cg.applied = append(cg.applied, "v2:memory.max="+v)
		}
		if err := cg.set(filepath.Join(dir, "memory.max"), v); err != nil {
			return err
		}
		_ = cg.set(filepath.Join(dir, "memory.swap.max"), swap)
	}
	return nil
}

// applyV1 writes in v1 the limits of lim v2 could not (see v1Dir).
func (t *Tree) applyV1(cg *Cgroup, lim Limits) error {
	d, err := t.v1Dir(cg, "pids", lim.Pids > 0 && !cg.has("pids"))
	if err != nil {
		return err
	}
	if d != "" {
		// +1: the spawning daemon thread sits in this cgroup while it forks
		// (Settle lowers it after), unless the process joins it later.
		v := lim.Pids
		if !cg.joined {
			v++
			cg.pidsMax = lim.Pids
		}
		if err := cg.set(filepath.Join(d, "pids.max"), strconv.FormatInt(v, 10)); err != nil {
			return err
		}
		cg.applied = append(cg.applied, "v1:pids.max="+strconv.FormatInt(lim.Pids, 10))
	}
	if d, err = t.v1Dir(cg, "memory", lim.Memory > 0 && !cg.has("memory")); err != nil {
		return err
	}
	if d != "" {
		v := strconv.FormatInt(lim.Memory, 10)
		mem, memsw := filepath.Join(d, "memory.limit_in_bytes"), filepath.Join(d, "memory.memsw.limit_in_bytes")
		// memsw may never be below the memory limit: raise it first when
		// the limit written ahead was lower.
		if old, ok := cg.written[mem]; ok && len(old) > 0 {
			if n, _ := strconv.ParseInt(old, 10, 64); n < lim.Memory {
				_ = cg.set(memsw, v)
			}
		}
		if err := cg.set(mem, v); err != nil {
			return err
		}
		_ = cg.set(memsw, v)
		cg.applied = append(cg.applied, "v1:memory.limit_in_bytes="+v)
	}
	return nil
}

// v1Dir is cg's ctl v1 directory when want (made when missing), else "":
// v1 limits only for what v2 could not do. A v1 directory the limits do
// not need is removed, unless a pre-started launcher was moved into it
// (a pooled cgroup made with the limits of an execution that needed it):
// then its limit is lifted and it goes with the cgroup at the end.
func (t *Tree) v1Dir(cg *Cgroup, ctl string, want bool) (string, error) {
	d := cg.v1[ctl]
	switch {
	case !want && d != "" && cg.inV1[d]:
		return "", cg.liftV1(ctl, d)
	case !want && d != "":
		delete(cg.v1, ctl)
		cg.forget(d)
		_ = os.Remove(d)
		for path := range cg.written { // made again later, it holds no limit
			if filepath.Dir(path) == d {
				delete(cg.written, path)
			}
		}
		return "", nil
	case !want || t.V1Parents[ctl] == "":
		return "", nil
	case d == "":
		d = filepath.Join(t.V1Parents[ctl], filepath.Base(cg.v2))
		if err := freshDir(d); err != nil {
			return "", err
		}
		cg.v1[ctl] = d
		cg.keepOpen(filepath.Join(d, "cgroup.procs"), true)
	}
	return d, nil
}

// EnterV1 moves the calling (locked) OS thread into cg's v1 cgroups (see
// Cgroup.enterV1); leave moves it back to termd's own, or to the root.
func (t *Tree) EnterV1(cg *Cgroup) (leave func() error, err error) {
	return cg.enterV1(t.OwnV1, t.V1Roots)
}

// RemoveStale kills what is left in the cgroups under the parents whose name
// stale says is a dead daemon's, and removes them.
func (t *Tree) RemoveStale(stale func(name string) bool) {
	dirs := []string{t.Parent}
	for _, d := range t.V1Parents {
		dirs = append(dirs, d)
	}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() && stale(e.Name()) {
				_ = KillPath(filepath.Join(dir, e.Name()))
			}
		}
	}
}

// Holds says whether process pid sits in a cgroup under the Tree's parents.
func (t *Tree) Holds(pid int) bool {
	if t.Parent == "" {
		return false
	}
	cgs, ok := Of(pid)
	if !ok {
		return false
	}
	if under(cgs.V2, t.ParentRel) {
		return true
	}
	for ctl, rel := range t.V1Rel {
		if under(cgs.V1[ctl], rel) {
			return true
		}
	}
	return false
}

func under(path, parent string) bool {
	if path == "" || parent == "" {
		return false
	}
	return path == parent || (len(path) > len(parent) && path[:len(parent)] == parent && path[len(parent)] == '/')
}
