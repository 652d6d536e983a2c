//go:build linux

package doctor

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/netns"
	"github.com/termd/termd/daemon/runner"
)

func kernelChecks() []Check {
	var cs []Check
	add := func(area string, st Status, msg, fix string) {
		cs = append(cs, Check{Area: area, Status: st, Message: msg, Fix: fix})
	}
	if os.Geteuid() == 0 {
		add("privilege", OK, "running as root: termd can make cgroups and namespaces and runs commands as the requesting user", "")
	} else {
		add("privilege", Warn, fmt.Sprintf("running as uid %d (user mode): commands run as this user; cgroup delegation depends on the user manager", os.Geteuid()), "run the system service for per-user execution (systemctl enable --now termd.socket)")
	}
	_ = runner.EnableSubreaper()
	c := runner.Probe()
	switch {
	case c.CgroupV2 != "" && c.Hybrid:
		add("cgroups", OK, "cgroup hybrid layout: v2 at "+c.CgroupV2+" gives each execution its own cgroup (membership, kill, freeze); v1 controllers give limits", "")
	case c.CgroupV2 != "":
		add("cgroups", OK, "cgroup v2 at "+c.CgroupV2+": each execution gets its own cgroup", "")
	default:
		add("cgroups", Warn, "no cgroup v2 hierarchy: executions are bounded by process group, /proc scans and the subreaper only (a process that escapes its group may survive)", "mount cgroup2 (mount -t cgroup2 none /sys/fs/cgroup/unified) or boot with systemd.unified_cgroup_hierarchy=1")
	}
	if c.CgroupV2 != "" {
		if c.Kill {
			add("cgroups", OK, "cgroup.kill available: cancel and timeout kill every process an execution started, setsid children included", "")
		} else {
			add("cgroups", Warn, "no cgroup.kill (kernel < 5.14): termd kills cgroup members one by one", "a 5.14+ kernel")
		}
		if c.Freeze {
			add("cgroups", OK, "cgroup.freeze available: pause/resume freezes whole executions", "")
		} else {
			add("cgroups", Warn, "no cgroup.freeze: pause/resume uses SIGSTOP/SIGCONT on the process group", "a 5.2+ kernel with cgroup v2")
		}
	}
	v2pids, v2mem := slices.Contains(c.Controllers, "pids"), slices.Contains(c.Controllers, "memory")
	switch {
	case v2pids && v2mem:
		add("limits", OK, "pids and memory limits via cgroup v2 controllers", "")
	case c.V1Pids != "" || c.V1Memory != "":
		var have, lack []string
		for _, x := range [][2]string{{"pids", c.V1Pids}, {"memory", c.V1Memory}} {
			if x[1] != "" {
				have = append(have, "v1 "+x[0]+" at "+x[1])
			} else {
				lack = append(lack, x[0])
			}
		}
		if len(lack) == 0 {
			add("limits", OK, "pids and memory limits via "+strings.Join(have, ", "), "")
		} else {
			add("limits", Warn, "limits via "+strings.Join(have, ", ")+"; no "+strings.Join(lack, ", ")+" limit", "mount the missing v1 controller or use cgroup v2 with Delegate=yes")
		}
	default:
		add("limits", Warn, "no pids or memory controller available to termd: executions run without pids/memory limits (timeouts and output caps still apply)", "run under systemd with Delegate=yes (see deploy/systemd/termd.service)")
	}
	abi := landlockABI()
	switch {
	case c.NetNS:
		add("netns", OK, "network namespaces available: commands the policy marks offline run with no network", "")
		// The workspace loopback: made, loopback up, entered, listened and
		// connected on inside, as termd does for each principal and workspace.
		if err := netns.Check(); err != nil {
			add("netns", Fail, "workspace loopbacks do not work: "+oneLine(err.Error()), "check that termd runs as root with CAP_SYS_ADMIN and that no seccomp filter refuses setns/unshare; until then plans on network workspace-loopback run with no network")
		} else {
			add("netns", OK, "workspace loopbacks work: a namespace per principal and workspace is made with its loopback up, joined, and reached by port forwards (docs/SANDBOX.md, Network)", "")
		}
	case abi >= 4:
		// User mode: no namespace of its own, but the launcher's Landlock
		// ruleset refuses TCP.
		add("netns", Warn, fmt.Sprintf("no network namespaces for termd's uid %d: commands the policy marks offline are kept off TCP by Landlock (ABI %d refuses their TCP connect and bind); UDP and other sockets are not confined", os.Geteuid(), abi), "run termd as root (system service) for an empty network namespace per offline command")
	default:
		add("netns", Warn, "network namespaces unavailable (needs root / CAP_SYS_ADMIN) and no Landlock network rules (ABI < 4): offline commands still get the network", "run termd as root (system service)")
	}
	cs = append(cs, landlockCheck())
	if c.Subreaper {
		add("subreaper", OK, "child subreaper available: double-forked children are re-parented to termd and reaped", "")
	} else {
		add("subreaper", Warn, "cannot become a child subreaper: double-forked children are found through cgroups only", "")
	}
	return cs
}

func landlockCheck() Check {
	lsm, _ := os.ReadFile("/sys/kernel/security/lsm")
	enabled := slices.Contains(strings.Split(strings.TrimSpace(string(lsm)), ","), "landlock")
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	return landlockCheckFrom(lsm, enabled, int(abi), errno)
}

// landlockABI is the kernel's Landlock ABI version, 0 when unavailable.
func landlockABI() int {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 || int(abi) < 0 {
		return 0
	}
	return int(abi)
}

func landlockCheckFrom(lsm []byte, enabled bool, abi int, errno unix.Errno) Check {
	switch {
	case errno == 0 && abi > 0:
		msg := fmt.Sprintf("Landlock ABI %d available (filesystem confinement for commands)", abi)
		if len(lsm) > 0 && !enabled {
			msg += " (not listed in /sys/kernel/security/lsm)"
		}
		return Check{Area: "landlock", Status: OK, Message: msg}
	case errno == unix.EOPNOTSUPP:
		return Check{Area: "landlock", Status: Warn, Message: "Landlock is built in but disabled at boot: commands are not filesystem-confined by Landlock", Fix: "add landlock to the lsm= kernel parameter"}
	default:
		return Check{Area: "landlock", Status: Warn, Message: "Landlock unavailable (" + errno.Error() + "): commands are not filesystem-confined by Landlock", Fix: "a 5.13+ kernel with CONFIG_SECURITY_LANDLOCK"}
	}
}
