//go:build linux

package harness

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// listenIn opens a TCP listener inside network namespace ns: a goroutine
// locked to its thread enters the namespace and never leaves (the thread
// ends with it), the socket stays in the namespace.
func listenIn(t *testing.T, ns, addr string) net.Listener {
	t.Helper()
	type res struct {
		l   net.Listener
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread is discarded
		f, err := os.Open(filepath.Join("/run/netns", ns))
		if err != nil {
			ch <- res{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- res{err: err}
			return
		}
		l, err := net.Listen("tcp", addr)
		ch <- res{l, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, ns, r.err)
	}
	t.Cleanup(func() { r.l.Close() })
	go func() {
		for {
			c, err := r.l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(ns))
			c.Close()
		}
	}()
	return r.l
}

// hello dials addr from the root namespace and returns what the host said.
func hello(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 256)
	n, err := c.Read(b)
	return string(b[:n]), err
}

func exists(ns, dev string) (nsOK, devOK bool) {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == ns {
			nsOK = true
		}
	}
	devOK = exec.Command("ip", "link", "show", dev).Run() == nil
	return
}

// Three hosts, each reachable from the root namespace at its own address
// (and each with the same port free: the namespaces are separate), one cut
// and restored; everything is gone after the test, and namespaces an
// earlier, killed test process left are swept.
func TestNetHosts(t *testing.T) {
	// A namespace of a test process that is gone.
	stale := NetNSPrefix + "999999999-1-0"
	requireIP(t)
	if out, err := exec.Command("ip", "netns", "add", stale).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", stale).Run() })

	var made []*NetHost
	t.Run("hosts", func(t *testing.T) {
		hosts := NewNetHosts(t, 3)
		made = hosts
		if ok, _ := exists(stale, "-"); ok {
			t.Errorf("the namespace %s of a finished test process was not swept", stale)
		}
		seen := map[string]bool{}
		for _, h := range hosts {
			if seen[h.IP] || seen[h.Name] || seen[h.RootDev] {
				t.Fatalf("hosts share an address or a name: %+v", hosts)
			}
			seen[h.IP], seen[h.Name], seen[h.RootDev] = true, true, true
			listenIn(t, h.Name, net.JoinHostPort(h.IP, "7443"))
		}
		for _, h := range hosts {
			if got, err := hello(net.JoinHostPort(h.IP, "7443")); err != nil || got != h.Name {
				t.Fatalf("%s at %s: %q %v", h.Name, h.IP, got, err)
			}
		}
		// Inside, the host's loopback is its own (lo is up) and the root
		// side of the link answers.
		argv := hosts[0].Exec("ip", "-o", "addr", "show", "lo")
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "127.0.0.1") {
			t.Errorf("lo in %s: %v %s", hosts[0].Name, err, out)
		}

		hosts[1].Cut()
		if got, err := hello(net.JoinHostPort(hosts[1].IP, "7443")); err == nil {
			t.Errorf("a cut host answered: %q", got)
		}
		for _, h := range []*NetHost{hosts[0], hosts[2]} {
			if got, err := hello(net.JoinHostPort(h.IP, "7443")); err != nil || got != h.Name {
				t.Errorf("%s while another host is cut: %q %v", h.Name, got, err)
			}
		}
		hosts[1].Restore()
		if got, err := hello(net.JoinHostPort(hosts[1].IP, "7443")); err != nil || got != hosts[1].Name {
			t.Errorf("restored host: %q %v", got, err)
		}
	})
	for _, h := range made {
		if nsOK, devOK := exists(h.Name, h.RootDev); nsOK || devOK {
			t.Errorf("%s left behind: namespace %v, device %s %v", h.Name, nsOK, h.RootDev, devOK)
		}
	}
}
