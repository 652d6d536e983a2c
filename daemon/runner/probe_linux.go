package runner

import (
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/runner/cgroup"
)

// Capabilities is what the kernel and our privileges allow on this host:
// its cgroups (cgroup.Host: CgroupV2, Hybrid, Kill, Freeze, Controllers,
// V1Pids, V1Memory, Layout, CgroupMissing) and the rest.
type Capabilities struct {
	cgroup.Host
	// NetNS: we may create network namespaces (CAP_SYS_ADMIN, /proc/self/ns/net).
	NetNS bool
	// Subreaper: this process is a child subreaper (see EnableSubreaper).
	Subreaper bool
}

// Probe inspects /proc and /sys to see what this host offers. It may create and
// remove one empty probe cgroup to learn whether cgroup.kill/cgroup.freeze exist.
func Probe() Capabilities {
	c := Capabilities{Host: cgroup.Probe()}
	c.NetNS = hasCapSysAdmin() && exists("/proc/self/ns/net")
	c.Subreaper = isSubreaper()
	return c
}

func hasCapSysAdmin() bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("CapEff:")); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(string(v)), 16, 64)
			return err == nil && caps&(1<<unix.CAP_SYS_ADMIN) != 0
		}
	}
	return false
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
