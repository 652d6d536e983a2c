package cgroup

import (
	"fmt"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// layout is what termd can use of the cgroup hierarchies it finds.
type layout struct {
	kind    string            // "unified", "hybrid", "v1" or "none"
	v2      string            // the v2 mount whose own cgroup termd may write ("" = none)
	v1      map[string]string // controller -> v1 mount termd may write (only for limits v2 lacks)
	missing []string          // what cannot be used, in words, with what to do
}

// writableDir says why dir cannot be written ("nil": it can). access(2)
// answers EROFS for a read-only mount, even for root.
func writableDir(dir string) error { return unix.Access(dir, unix.W_OK|unix.X_OK) }

const delegateFix = "run termd as the shipped systemd service (Delegate=yes, deploy/systemd/termd.service); in a container, give it a writable cgroup2 of its own (docs/OPERATIONS.md, \"Containers\")"

// detectLayout works out, from the cgroup mounts, termd's own cgroups
// (/proc/self/cgroup), the v2 controllers of its own cgroup and a check of
// which directories it may write, what termd can use: one v2 cgroup per
// execution where its own v2 cgroup is writable (delegated), pids and
// memory limits from v2 where its cgroup has the controller, else from a
// writable v1 hierarchy. v1 alone gives no cgroup per execution (the runner
// hangs v1 limits on a v2 cgroup). What it cannot use is said in missing.
func detectLayout(ms mountSet, own Paths, v2ctls []string, writable func(string) error) layout {
	l := layout{v1: map[string]string{}}
	switch {
	case ms.v2 != "" && len(ms.v1) > 0:
		l.kind = "hybrid"
	case ms.v2 != "":
		l.kind = "unified"
	case len(ms.v1) > 0:
		l.kind = "v1"
	default:
		l.kind = "none"
	}
	const noCgroup = "executions get no cgroup of their own: they are killed and frozen by process group and found by /proc scans and the subreaper, so a process that leaves its group may outlive its execution"
	if ms.v2 == "" {
		l.missing = append(l.missing, fmt.Sprintf("no cgroup v2 hierarchy is mounted (layout %s): %s; mount cgroup2 (mount -t cgroup2 none /sys/fs/cgroup/unified) or boot with systemd.unified_cgroup_hierarchy=1", l.kind, noCgroup))
	} else {
		dir := filepath.Join(ms.v2, own.V2)
		switch err := writable(dir); {
		case ms.v2ro:
			l.missing = append(l.missing, fmt.Sprintf("the cgroup v2 hierarchy at %s is mounted read-only: %s; %s", ms.v2, noCgroup, delegateFix))
		case err != nil:
			l.missing = append(l.missing, fmt.Sprintf("termd's own cgroup %s is not writable (%v): it was not delegated to termd, so %s; %s", dir, err, noCgroup, delegateFix))
		default:
			l.v2 = ms.v2
		}
	}
	for _, ctl := range []string{"pids", "memory"} {
		if l.v2 != "" && slices.Contains(v2ctls, ctl) {
			continue
		}
		m := ms.v1[ctl]
		var what string
		if ctl == "pids" {
			what = "pids limits (a plan's max_pids, fork bombs) are not enforced"
		} else {
			what = "memory limits (a plan's max_memory) are not enforced"
		}
		switch {
		case l.v2 == "":
			l.missing = append(l.missing, fmt.Sprintf("%s: they need a cgroup per execution", what))
		case m == "":
			l.missing = append(l.missing, fmt.Sprintf("%s: termd's v2 cgroup %s has no %s controller and no v1 %s hierarchy is mounted; %s", what, filepath.Join(ms.v2, own.V2), ctl, ctl, delegateFix))
		case ms.v1ro[ctl]:
			l.missing = append(l.missing, fmt.Sprintf("%s: the v1 %s hierarchy at %s is read-only (a container's) and termd's v2 cgroup has no %s controller (on a hybrid host the v2 hierarchy has only the controllers v1 does not hold); boot the host with cgroup v2 only (systemd.unified_cgroup_hierarchy=1)", what, ctl, m, ctl))
		default:
			if err := writable(filepath.Join(m, own.V1[ctl])); err != nil {
				l.missing = append(l.missing, fmt.Sprintf("%s: termd's v1 %s cgroup %s is not writable (%v) and its v2 cgroup has no %s controller; %s", what, ctl, filepath.Join(m, own.V1[ctl]), err, ctl, delegateFix))
				continue
			}
			l.v1[ctl] = m
		}
	}
	return l
}
