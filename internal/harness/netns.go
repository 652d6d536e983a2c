package harness

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// Hosts in network namespaces, for fleet tests: each NetHost is a named
// network namespace (`ip netns`) with lo up and one veth link to the root
// namespace, a /30 of its own (the root side .1, the host side .2 of its
// block). A termd started with Options.NetNS runs inside it: its unix socket
// is still a path in the test directory (unix sockets do not belong to a
// network namespace), its TCP listeners are the namespace's own, and it
// reaches the root namespace only over its link, at RootIP. Cutting the
// link (Cut) leaves the host running but unreachable, as a pulled cable.
//
// Names are unique per test process: the namespaces are called
// termd-t-PID-TICKS-N (the creator's pid and start time, as the build
// directories are), the root-side devices td<random><N>; the host side is
// eth0 in every namespace. Cleanup deletes them even when the test fails,
// and a new run first deletes namespaces whose creator is gone (a test
// binary killed before its cleanup), which takes their veth pairs with
// them.

// NetHost is one network namespace with its link to the root namespace.
type NetHost struct {
	Name    string // the namespace (ip netns NAME)
	RootDev string // the link's device in the root namespace
	HostDev string // the link's device in the namespace (eth0)
	RootIP  string // the root namespace's address on the link
	IP      string // the namespace's address on the link
	t       testing.TB
}

// NetNSPrefix starts the name of every namespace the harness makes.
const NetNSPrefix = "termd-t-"

// Missing programs fail fleet tests: a netns test that cannot set up its
// hosts proves nothing, so it never skips.
func requireIP(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("`ip` (iproute2) is not installed: the fleet tests put hosts in network namespaces with it; run scripts/ci-deps.sh (apt-get install iproute2)")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Fatalf("`nsenter` (util-linux) is not installed: termd is started inside a host's network namespace with it; install util-linux")
	}
	if os.Geteuid() != 0 {
		t.Fatalf("network namespaces need root (CAP_SYS_ADMIN and CAP_NET_ADMIN): run the fleet tests as root, as make test does in CI")
	}
}

// ip runs `ip ARGS...` and fails t with its output on error.
func ip(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// NewNetHosts makes n network namespaces, each with its link to the root
// namespace up, and deletes them when t ends.
func NewNetHosts(t testing.TB, n int) []*NetHost {
	t.Helper()
	requireIP(t)
	sweepNetNS()
	base := freeSubnet(t)
	tag := randHex(t, 3)
	var hosts []*NetHost
	for i := 0; i < n; i++ {
		h := &NetHost{
			Name:    fmt.Sprintf("%s%s-%d", NetNSPrefix, strings.ReplaceAll(selfIdent(), " ", "-"), netnsSeq.Add(1)),
			RootDev: fmt.Sprintf("td%s%d", tag, i),
			HostDev: "eth0",
			RootIP:  fmt.Sprintf("%s.%d", base, 4*i+1),
			IP:      fmt.Sprintf("%s.%d", base, 4*i+2),
			t:       t,
		}
		// Registered before anything exists: whatever was made goes even
		// when a later step fails.
		t.Cleanup(h.remove)
		ip(t, "netns", "add", h.Name)
		ip(t, "link", "add", h.RootDev, "type", "veth", "peer", "name", h.HostDev, "netns", h.Name)
		ip(t, "addr", "add", h.RootIP+"/30", "dev", h.RootDev)
		ip(t, "link", "set", h.RootDev, "up")
		ip(t, "-n", h.Name, "addr", "add", h.IP+"/30", "dev", h.HostDev)
		ip(t, "-n", h.Name, "link", "set", h.HostDev, "up")
		ip(t, "-n", h.Name, "link", "set", "lo", "up")
		hosts = append(hosts, h)
	}
	return hosts
}

// Cut takes the host's link down on the root side: the host keeps running,
// nothing reaches it and nothing it sends leaves (open TCP connections are
// not reset; they stall, as over a pulled cable).
func (h *NetHost) Cut() {
	h.t.Helper()
	ip(h.t, "link", "set", h.RootDev, "down")
}

// Restore brings the link up again.
func (h *NetHost) Restore() {
	h.t.Helper()
	ip(h.t, "link", "set", h.RootDev, "up")
}

// Exec is the command line that runs argv inside the namespace (network
// namespace only: the file system, pids and users are the root's).
func (h *NetHost) Exec(argv ...string) []string {
	return append(nsenterArgv(h.Name), argv...)
}

func nsenterArgv(ns string) []string {
	return []string{"nsenter", "--net=" + filepath.Join("/run/netns", ns), "--"}
}

func (h *NetHost) remove() {
	// Deleting the root-side device deletes its peer; deleting the
	// namespace deletes whatever device is left in it. Errors are
	// "does not exist" when a step never ran.
	_ = exec.Command("ip", "link", "del", h.RootDev).Run()
	_ = exec.Command("ip", "netns", "del", h.Name).Run()
}

// sweepNetNS deletes namespaces of earlier test processes that are gone.
func sweepNetNS() {
	if startTicks(os.Getpid()) == "" {
		return
	}
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || !strings.HasPrefix(f[0], NetNSPrefix) {
			continue
		}
		// termd-t-PID-TICKS-N
		parts := strings.Split(strings.TrimPrefix(f[0], NetNSPrefix), "-")
		if len(parts) != 3 || procIdent(parts[:2]) {
			continue
		}
		_ = exec.Command("ip", "netns", "del", f[0]).Run()
	}
}

// freeSubnet picks a 10.X.Y.0/24 no address or route of the root namespace
// is in, randomly, so parallel test processes do not pick the same one.
func freeSubnet(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("ip", "-4", "-o", "route", "show", "table", "all").CombinedOutput()
	if err != nil {
		t.Fatalf("ip route: %v\n%s", err, out)
	}
	addrs, err := exec.Command("ip", "-4", "-o", "addr").CombinedOutput()
	if err != nil {
		t.Fatalf("ip addr: %v\n%s", err, addrs)
	}
	used := string(out) + string(addrs)
	for i := 0; i < 100; i++ {
		x, _ := rand.Int(rand.Reader, big.NewInt(50))
		y, _ := rand.Int(rand.Reader, big.NewInt(256))
		base := fmt.Sprintf("10.%d.%d", 200+x.Int64(), y.Int64())
		if !strings.Contains(used, base+".") {
			return base
		}
	}
	t.Fatal("no free 10.200-249.Y.0/24 for the test hosts' links")
	return ""
}

func randHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// netnsSeq numbers the namespaces of this test process.
var netnsSeq atomic.Int64
