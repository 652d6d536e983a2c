package cgroup

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Mount tables and /proc/self/cgroup as termd sees them on each layout. The
// hybrid one is termd.service's under systemd 252 booted by systemd-nspawn
// on a hybrid host (the real test in deploy boots it): v1 controllers
// mounted read-only, v2 at /sys/fs/cgroup/unified writable.
const (
	nspawnHybridMountinfo = `277 276 0:48 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:77 master:12 - tmpfs tmpfs ro,size=4096k,nr_inodes=1024,mode=755
278 277 0:33 / /sys/fs/cgroup/freezer ro,nosuid,nodev,noexec,relatime shared:78 master:13 - cgroup cgroup rw,freezer
281 277 0:35 / /sys/fs/cgroup/pids ro,nosuid,nodev,noexec,relatime shared:81 master:16 - cgroup cgroup rw,pids
285 277 0:31 / /sys/fs/cgroup/memory ro,nosuid,nodev,noexec,relatime shared:85 master:20 - cgroup cgroup rw,memory
286 277 0:37 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:86 master:21 - cgroup2 cgroup rw
287 277 0:36 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:87 master:22 - cgroup cgroup rw,name=systemd
`
	nspawnHybridCgroup = "9:name=systemd:/system.slice/termd.service\n8:pids:/\n4:memory:/\n6:freezer:/\n0::/system.slice/termd.service\n"

	hostHybridMountinfo = `30 25 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
35 30 0:31 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,pids
36 30 0:32 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,memory
`
	hostHybridCgroup = "12:pids:/system.slice/termd.service\n11:memory:/system.slice/termd.service\n0::/system.slice/termd.service\n"

	unifiedMountinfo = `35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	unifiedCgroup = "0::/system.slice/termd.service\n"

	v1Mountinfo = `30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec shared:9 - tmpfs tmpfs rw,mode=755
35 30 0:31 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,pids
36 30 0:32 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,memory
`
	v1Cgroup = "12:pids:/docker/abc\n11:memory:/docker/abc\n"
)

// roFS answers like access(2) on a host where the paths in ro are read-only
// and those in denied not ours.
func roFS(ro []string, denied ...string) func(string) error {
	return func(dir string) error {
		for _, p := range ro {
			if dir == p || strings.HasPrefix(dir, p+"/") {
				return unix.EROFS
			}
		}
		for _, p := range denied {
			if dir == p {
				return unix.EACCES
			}
		}
		return nil
	}
}

func TestCgroupLayoutDetection(t *testing.T) {
	for _, c := range []struct {
		name, mountinfo, cgroup string
		v2ctls                  []string
		writable                func(string) error
		kind, v2                string
		v1                      map[string]string
		missing                 []string // substrings, one a missing line, in order
	}{
		{
			name: "unified, delegated (Delegate=yes)", mountinfo: unifiedMountinfo, cgroup: unifiedCgroup,
			v2ctls: []string{"cpu", "memory", "pids"}, writable: roFS(nil),
			kind: "unified", v2: "/sys/fs/cgroup",
		},
		{
			name: "unified, not delegated", mountinfo: unifiedMountinfo, cgroup: unifiedCgroup,
			v2ctls: []string{"memory", "pids"}, writable: roFS(nil, "/sys/fs/cgroup/system.slice/termd.service"),
			kind: "unified", v2: "",
			missing: []string{"termd's own cgroup /sys/fs/cgroup/system.slice/termd.service is not writable", "pids limits", "memory limits"},
		},
		{
			name: "unified, delegated without memory", mountinfo: unifiedMountinfo, cgroup: unifiedCgroup,
			v2ctls: []string{"pids"}, writable: roFS(nil),
			kind: "unified", v2: "/sys/fs/cgroup",
			missing: []string{"memory limits (a plan's max_memory) are not enforced: termd's v2 cgroup /sys/fs/cgroup/system.slice/termd.service has no memory controller and no v1 memory hierarchy is mounted"},
		},
		{
			name: "hybrid in systemd-nspawn: v1 read-only, v2 writable", mountinfo: nspawnHybridMountinfo, cgroup: nspawnHybridCgroup,
			writable: roFS([]string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory"}),
			kind:     "hybrid", v2: "/sys/fs/cgroup/unified",
			missing: []string{"pids limits (a plan's max_pids, fork bombs) are not enforced: the v1 pids hierarchy at /sys/fs/cgroup/pids is read-only", "memory limits (a plan's max_memory) are not enforced: the v1 memory hierarchy at /sys/fs/cgroup/memory is read-only"},
		},
		{
			name: "hybrid host, v1 delegated", mountinfo: hostHybridMountinfo, cgroup: hostHybridCgroup,
			writable: roFS(nil),
			kind:     "hybrid", v2: "/sys/fs/cgroup/unified",
			v1: map[string]string{"pids": "/sys/fs/cgroup/pids", "memory": "/sys/fs/cgroup/memory"},
		},
		{
			name: "hybrid host, v1 pids not ours", mountinfo: hostHybridMountinfo, cgroup: hostHybridCgroup,
			writable: roFS(nil, "/sys/fs/cgroup/pids/system.slice/termd.service"),
			kind:     "hybrid", v2: "/sys/fs/cgroup/unified",
			v1:      map[string]string{"memory": "/sys/fs/cgroup/memory"},
			missing: []string{"pids limits (a plan's max_pids, fork bombs) are not enforced: termd's v1 pids cgroup /sys/fs/cgroup/pids/system.slice/termd.service is not writable (permission denied)"},
		},
		{
			name: "v1 only", mountinfo: v1Mountinfo, cgroup: v1Cgroup, writable: roFS(nil),
			kind: "v1", v2: "",
			missing: []string{"no cgroup v2 hierarchy is mounted (layout v1)", "pids limits", "memory limits"},
		},
		{
			name: "none", mountinfo: "", cgroup: "", writable: roFS(nil),
			kind: "none", v2: "",
			missing: []string{"no cgroup v2 hierarchy is mounted (layout none)", "pids limits", "memory limits"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := detectLayout(parseMountinfo(strings.NewReader(c.mountinfo)), parseProcCgroup([]byte(c.cgroup)), c.v2ctls, c.writable)
			if l.kind != c.kind || l.v2 != c.v2 {
				t.Errorf("kind %q v2 %q, want %q %q", l.kind, l.v2, c.kind, c.v2)
			}
			if len(l.v1) != len(c.v1) {
				t.Errorf("v1 %v, want %v", l.v1, c.v1)
			}
			for k, v := range c.v1 {
				if l.v1[k] != v {
					t.Errorf("v1 %v, want %v", l.v1, c.v1)
				}
			}
			if len(l.missing) != len(c.missing) {
				t.Fatalf("missing:\n%s\nwant %d lines containing %q", strings.Join(l.missing, "\n"), len(c.missing), c.missing)
			}
			for i, want := range c.missing {
				if !strings.Contains(l.missing[i], want) {
					t.Errorf("missing[%d] = %q, want it to contain %q", i, l.missing[i], want)
				}
			}
		})
	}
}

// The parser keeps a mount's read-only flag (field 6), which is what tells a
// container's v1 hierarchies from writable ones.
func TestParseMountinfoReadOnly(t *testing.T) {
	ms := parseMountinfo(strings.NewReader(nspawnHybridMountinfo))
	if ms.v2 != "/sys/fs/cgroup/unified" || ms.v2ro {
		t.Errorf("v2 %q ro=%t, want /sys/fs/cgroup/unified writable", ms.v2, ms.v2ro)
	}
	if !ms.v1ro["pids"] || !ms.v1ro["memory"] || ms.v1["pids"] != "/sys/fs/cgroup/pids" {
		t.Errorf("v1 %v ro %v, want pids and memory read-only", ms.v1, ms.v1ro)
	}
}
