// Command probe tries one thing a sandbox must allow or refuse and prints
// "ok" or "denied: <error>" (exit 0 either way; exit 2 on bad usage). It is
// built by the sandbox tests and the end-to-end tests.
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe ACTION [ARG...]")
		os.Exit(2)
	}
	act, ok := actions[os.Args[1]]
	if !ok {
		fmt.Fprintln(os.Stderr, "probe: unknown action "+os.Args[1])
		os.Exit(2)
	}
	printed, err := act()
	if !printed {
		report(err)
	}
}

// arg is the i-th argument; a missing one is bad usage (exit 2).
func arg(i int) string {
	if len(os.Args) <= i {
		fmt.Fprintln(os.Stderr, "probe "+os.Args[1]+": missing argument")
		os.Exit(2)
	}
	return os.Args[i]
}

// An action tries one thing and returns what happened, or printed when it
// has printed its own answer.
type action func() (printed bool, err error)

// actions are the probe's actions by name; a comment gives each one's
// arguments and what it does.
var actions = map[string]action{
	"write": func() (bool, error) { // write FILE
		return false, os.WriteFile(arg(2), []byte("probe\n"), 0o644)
	},
	"read": func() (bool, error) { // read FILE
		_, err := os.ReadFile(arg(2))
		return false, err
	},
	"exec": func() (bool, error) { // exec PROGRAM: execve it (replaces this process)
		return false, syscall.Exec(arg(2), []string{arg(2), "-c", "echo executed"}, os.Environ())
	},
	"connect": func() (bool, error) { return false, dial("tcp") },  // connect HOST:PORT
	"dial":    func() (bool, error) { return false, dial("unix") }, // dial SOCKET: connect to a unix socket by its path
	"serve":   serve,
	"get":     get,
	"owner":   owner,
	"cat":     cat,
	"kill": func() (bool, error) { // kill PID: signal 0 asks whether we may signal it
		pid, _ := strconv.Atoi(arg(2))
		return false, syscall.Kill(pid, 0)
	},
	"ptrace":  ptrace,
	"settime": settime,
	"module":  module,
	"mntns":   mntns,
	"unshare-user": func() (bool, error) {
		return false, syscall.Unshare(syscall.CLONE_NEWUSER)
	},
	"whoami":   whoami,
	"forks":    forks,
	"leave":    leave,
	"netstate": netstate,
}

// report prints "ok", "denied: ERR" for a refusal, or "error: ERR", with the
// bare error number's text, so callers can match it.
func report(err error) {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		err = errno
	}
	switch {
	case err == nil:
		fmt.Println("ok")
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EROFS), errors.Is(err, syscall.ENETUNREACH):
		fmt.Println("denied:", err)
	default:
		fmt.Println("error:", err)
	}
}

// dial connects to the address in the first argument and hangs up.
func dial(network string) error {
	c, err := net.DialTimeout(network, arg(2), 2*time.Second)
	if err == nil {
		c.Close()
	}
	return err
}

// serve PORT TEXT: a dev server: answer every HTTP request on 127.0.0.1:PORT with TEXT, until killed.
func serve() (bool, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:"+arg(2))
	if err != nil {
		return false, err
	}
	fmt.Println("listening on", ln.Addr())
	text := arg(3)
	return false, http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, text) }))
}

// get HOST:PORT: an HTTP GET of http://HOST:PORT/, printing "got: BODY".
func get() (bool, error) {
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + arg(2) + "/")
	if err != nil {
		return false, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("got: %s\n", body)
	return true, nil
}

// owner FILE: its uid and gid as this process sees them.
func owner() (bool, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(arg(2), &st); err != nil {
		return false, err
	}
	fmt.Printf("uid=%d gid=%d\n", st.Uid, st.Gid)
	return true, nil
}

// cat FILE: print what it reads.
func cat() (bool, error) {
	b, err := os.ReadFile(arg(2))
	if err != nil {
		return false, err
	}
	fmt.Printf("read %d bytes: %s\n", len(b), b)
	return true, nil
}

// ptrace PID.
func ptrace() (bool, error) {
	pid, _ := strconv.Atoi(arg(2))
	err := syscall.PtraceAttach(pid)
	if err == nil {
		_ = syscall.PtraceDetach(pid)
	}
	return false, err
}

// settime: set the clock to what it is.
func settime() (bool, error) {
	var tv syscall.Timeval
	_ = syscall.Gettimeofday(&tv)
	return false, syscall.Settimeofday(&tv)
}

// module: finit_module on /dev/null: EPERM before anything else when refused.
func module() (bool, error) {
	f, _ := os.Open("/dev/null")
	_, _, e := syscall.Syscall(unix.SYS_FINIT_MODULE, f.Fd(), 0, 0)
	if e != 0 {
		return false, e
	}
	return false, nil
}

// mntns: its mount namespace, as /proc/self/ns/mnt names it.
func mntns() (bool, error) {
	ns, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(ns)
	return true, nil
}

// whoami: who and where it runs: uid, gid, groups, cwd, nice, v2 cgroup, v1 pids and memory cgroups.
func whoami() (bool, error) {
	cwd, _ := os.Getwd()
	groups, _ := os.Getgroups()
	cg, _ := os.ReadFile("/proc/self/cgroup")
	v2 := ""
	var v1 []string
	for _, l := range strings.Split(string(cg), "\n") {
		if rest, ok := strings.CutPrefix(l, "0::"); ok {
			v2 = rest
		} else if _, ctl, ok := strings.Cut(l, ":"); ok && (strings.HasPrefix(ctl, "pids:") || strings.HasPrefix(ctl, "memory:")) {
			v1 = append(v1, ctl)
		}
	}
	pidsMax := "none" // the v1 pids limit it runs under, where it has a v1 pids cgroup
	for _, c := range v1 {
		if path, ok := strings.CutPrefix(c, "pids:"); ok && path != "/" {
			b, err := os.ReadFile("/sys/fs/cgroup/pids" + path + "/pids.max")
			pidsMax = strings.TrimSpace(string(b))
			if err != nil {
				pidsMax = "unreadable"
			}
		}
	}
	prio, _ := unix.Getpriority(unix.PRIO_PROCESS, 0)
	fmt.Printf("uid=%d gid=%d groups=%v cwd=%s nice=%d cgroup=%s v1=%s v1pids.max=%s\n", os.Getuid(), os.Getgid(), groups, cwd, 20-prio, v2, strings.Join(v1, ","), pidsMax)
	return true, nil
}

// forks: fork until refused: how many children, and its pids cgroup's count and limit then.
func forks() (bool, error) {
	n := 0
	for ; n < 4096; n++ {
		pid, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
		if e != 0 {
			break
		}
		if pid == 0 { // the child waits to be killed with its cgroup
			for {
				syscall.RawSyscall(syscall.SYS_PAUSE, 0, 0, 0)
			}
		}
	}
	cg, _ := os.ReadFile("/proc/self/cgroup")
	var dirs []string // v1's pids cgroup where there is one, else v2's
	for _, l := range strings.Split(string(cg), "\n") {
		if _, rest, ok := strings.Cut(l, ":pids:"); ok {
			dirs = append([]string{"/sys/fs/cgroup/pids" + rest}, dirs...)
		} else if rest, ok := strings.CutPrefix(l, "0::"); ok {
			dirs = append(dirs, "/sys/fs/cgroup"+rest, "/sys/fs/cgroup/unified"+rest)
		}
	}
	var cur, max []byte
	for _, d := range dirs {
		var err error
		if max, err = os.ReadFile(d + "/pids.max"); err == nil {
			cur, _ = os.ReadFile(d + "/pids.current")
			break
		}
	}
	fmt.Printf("forks=%d current=%s max=%s\n", n, strings.TrimSpace(string(cur)), strings.TrimSpace(string(max)))
	return true, nil
}

// leave NAME PORT: a child in its own session holds an abstract unix
// listener @NAME, TCP and UDP sockets on :PORT and a file TMPDIR/NAME;
// prints "left netns=... pid=CHILD" and exits.
func leave() (bool, error) {
	if os.Getenv("PROBE_HOLD") == "1" {
		fmt.Println("holding")
		os.Stdout.Close()
		for {
			syscall.RawSyscall(syscall.SYS_PAUSE, 0, 0, 0)
		}
	}
	var held []*os.File
	ua, err := net.Listen("unix", "@"+arg(2))
	if err != nil {
		return false, err
	}
	f1, _ := ua.(*net.UnixListener).File()
	held = append(held, f1)
	if tl, terr := net.Listen("tcp", ":"+arg(3)); terr == nil {
		f2, _ := tl.(*net.TCPListener).File()
		held = append(held, f2)
	}
	if pc, perr := net.ListenPacket("udp", ":"+arg(3)); perr == nil {
		f3, _ := pc.(*net.UDPConn).File()
		held = append(held, f3)
	}
	_ = os.WriteFile(os.Getenv("TMPDIR")+"/"+arg(2), []byte("left\n"), 0o600)
	c := exec.Command(os.Args[0], os.Args[1:]...)
	c.Env = append(os.Environ(), "PROBE_HOLD=1")
	c.ExtraFiles = held
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		return false, err
	}
	line := make([]byte, 8)
	_, _ = io.ReadFull(out, line) // "holding\n": it has them
	n := socketsInUse()
	fmt.Printf("left netns=%s pid=%d sockets=%d\n", netnsID(), c.Process.Pid, n)
	return true, nil
}

// netstate NAME PORT: its network namespace, the sockets in use in it,
// whether @NAME and 127.0.0.1:PORT answer, whether TMPDIR/NAME exists.
func netstate() (bool, error) {
	n := socketsInUse()
	ns := netnsID()
	answer := func(network, addr string) string {
		c, err := net.DialTimeout(network, addr, time.Second)
		if err != nil {
			return "no"
		}
		c.Close()
		return "yes"
	}
	_, serr := os.Stat(os.Getenv("TMPDIR") + "/" + arg(2))
	fmt.Printf("netns=%s sockets=%d abstract=%s tcp=%s tmpfile=%v\n", ns, n, answer("unix", "@"+arg(2)), answer("tcp", "127.0.0.1:"+arg(3)), serr == nil)
	return true, nil
}

// socketsInUse is the count of sockets in this network namespace
// (/proc/net/sockstat, "sockets: used N"); -1 when unreadable.
func socketsInUse() int {
	data, err := os.ReadFile("/proc/self/net/sockstat")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, "sockets: used "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(rest))
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// netnsID names this network namespace for good: its inode number (which
// the kernel gives again once the namespace is freed) and its cookie
// (SO_NETNS_COOKIE, never given again).
func netnsID() string {
	ino, _ := os.Readlink("/proc/self/ns/net")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return ino + "/?"
	}
	defer unix.Close(fd)
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return ino + "/?"
	}
	return fmt.Sprintf("%s/%d", ino, cookie)
}
