package cgroup

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Host is what the host's cgroup hierarchies offer termd.
type Host struct {
	// CgroupV2 is the mount path of the cgroup v2 hierarchy ("" when there is none):
	// /sys/fs/cgroup on a pure v2 host, /sys/fs/cgroup/unified on a hybrid one.
	CgroupV2 string
	// Hybrid is true when v1 controller hierarchies are mounted next to the v2 one.
	Hybrid bool
	// Kill and Freeze: the v2 hierarchy has cgroup.kill / cgroup.freeze.
	Kill, Freeze bool
	// Controllers lists the v2 controllers available to our own cgroup
	// (empty on a hybrid host, where controllers live in v1).
	Controllers []string
	// V1Pids and V1Memory are the v1 hierarchy mounts ("" when absent).
	V1Pids, V1Memory string
	// Layout is the cgroup layout found: "unified" (v2 only), "hybrid" (v1
	// controllers beside a v2 hierarchy), "v1" (no v2) or "none".
	Layout string
	// CgroupMissing says, in words and with what to do, what termd cannot
	// use of the cgroup layout (a read-only or undelegated hierarchy, a
	// missing controller, so a limit that is not enforced); empty when
	// executions get their own cgroup and both limits.
	CgroupMissing []string
}

// Probe inspects /proc and /sys to see what this host's cgroups offer. It may
// create and remove one empty probe cgroup to learn whether
// cgroup.kill/cgroup.freeze exist.
func Probe() Host {
	var c Host
	mounts := cgroupMounts()
	self := ownCgroup("")
	var ctls []string
	if mounts.v2 != "" {
		ctls = readControllers(filepath.Join(mounts.v2, self.V2, "cgroup.controllers"))
	}
	lay := detectLayout(mounts, self, ctls, writableDir)
	c.Layout, c.CgroupMissing = lay.kind, lay.missing
	c.CgroupV2 = lay.v2
	c.V1Pids = lay.v1["pids"]
	c.V1Memory = lay.v1["memory"]
	c.Hybrid = mounts.v2 != "" && len(mounts.v1) > 0
	if c.CgroupV2 != "" {
		own := filepath.Join(c.CgroupV2, self.V2)
		c.Controllers = ctls
		c.Kill, c.Freeze = probeKillFreeze(c.CgroupV2, own)
	}
	return c
}

type mountSet struct {
	v2   string
	v2ro bool              // the v2 mount is read-only
	v1   map[string]string // controller -> mount point
	v1ro map[string]bool   // controller -> its mount is read-only
}

// cgroupMounts parses /proc/self/mountinfo for cgroup and cgroup2 mounts.
func cgroupMounts() mountSet {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return mountSet{v1: map[string]string{}, v1ro: map[string]bool{}}
	}
	defer f.Close()
	return parseMountinfo(f)
}

// parseMountinfo reads cgroup and cgroup2 mounts from a mountinfo table.
func parseMountinfo(r io.Reader) mountSet {
	ms := mountSet{v1: map[string]string{}, v1ro: map[string]bool{}}
	var v2s []string
	v2ro := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		line := sc.Text()
		sep := strings.Index(line, " - ")
		if sep < 0 {
			continue
		}
		pre := strings.Fields(line[:sep])
		post := strings.Fields(line[sep+3:])
		if len(pre) < 5 || len(post) < 1 {
			continue
		}
		mp := unescapeMount(pre[4])
		ro := len(pre) >= 6 && slices.Contains(strings.Split(pre[5], ","), "ro")
		switch post[0] {
		case "cgroup2":
			v2s = append(v2s, mp)
			v2ro[mp] = ro
		case "cgroup":
			if len(post) >= 3 {
				for _, o := range strings.Split(post[2], ",") {
					if o == "pids" || o == "memory" || o == "freezer" {
						if _, ok := ms.v1[o]; !ok {
							ms.v1[o] = mp
							ms.v1ro[o] = ro
						}
					}
				}
			}
		}
	}
	// Prefer the canonical places: pure v2 at /sys/fs/cgroup, hybrid at .../unified.
	for _, want := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		for _, m := range v2s {
			if m == want {
				ms.v2, ms.v2ro = m, v2ro[m]
				return ms
			}
		}
	}
	if len(v2s) > 0 {
		ms.v2, ms.v2ro = v2s[0], v2ro[v2s[0]]
	}
	return ms
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Paths are the cgroups of one process, as /proc/<pid>/cgroup lists them.
type Paths struct {
	V2 string            // path relative to the v2 mount ("/" for the root)
	V1 map[string]string // controller -> path relative to that v1 mount
}

// ownCgroup parses /proc/<pid>/cgroup ("" = self).
func ownCgroup(pid string) Paths {
	if pid == "" {
		pid = "self"
	}
	data, _ := os.ReadFile("/proc/" + pid + "/cgroup")
	return parseProcCgroup(data)
}

// parseProcCgroup parses a /proc/PID/cgroup file.
func parseProcCgroup(data []byte) Paths {
	p := Paths{V2: "", V1: map[string]string{}}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			p.V2 = parts[2]
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			p.V1[ctl] = parts[2]
		}
	}
	if p.V2 == "" {
		p.V2 = "/"
	}
	return p
}

func readControllers(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Fields(string(data))
}

// probeKillFreeze answers from an existing non-root cgroup if it can, else by
// creating a throwaway child of own (root cgroups never carry these files).
func probeKillFreeze(mount, own string) (kill, freeze bool) {
	if own != mount {
		return exists(filepath.Join(own, "cgroup.kill")), exists(filepath.Join(own, "cgroup.freeze"))
	}
	dir, err := os.MkdirTemp(own, "termd-probe-")
	if err != nil {
		// Not ours to create (user mode in the root cgroup): any existing
		// child cgroup tells what the kernel offers just as well.
		return childKillFreeze(mount)
	}
	defer os.Remove(dir)
	return exists(filepath.Join(dir, "cgroup.kill")), exists(filepath.Join(dir, "cgroup.freeze"))
}

// childKillFreeze looks for cgroup.kill / cgroup.freeze in the first child
// cgroup of the v2 mount.
func childKillFreeze(mount string) (kill, freeze bool) {
	ents, err := os.ReadDir(mount)
	if err != nil {
		return false, false
	}
	for _, e := range ents {
		if e.IsDir() {
			d := filepath.Join(mount, e.Name())
			return exists(filepath.Join(d, "cgroup.kill")), exists(filepath.Join(d, "cgroup.freeze"))
		}
	}
	return false, false
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Of returns /proc/<pid>/cgroup parsed; false when the process is gone.
func Of(pid int) (Paths, bool) {
	if !exists("/proc/" + strconv.Itoa(pid)) {
		return Paths{}, false
	}
	return ownCgroup(strconv.Itoa(pid)), true
}
