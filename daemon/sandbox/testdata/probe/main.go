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
	arg := func(i int) string {
		if len(os.Args) <= i {
			fmt.Fprintln(os.Stderr, "probe "+os.Args[1]+": missing argument")
			os.Exit(2)
		}
		return os.Args[i]
	}
	var err error
	switch os.Args[1] {
	case "write": // write FILE
		err = os.WriteFile(arg(2), []byte("probe\n"), 0o644)
	case "read": // read FILE
		_, err = os.ReadFile(arg(2))
	case "exec": // exec PROGRAM: execve it (replaces this process)
		err = syscall.Exec(arg(2), []string{arg(2), "-c", "echo executed"}, os.Environ())
	case "connect": // connect HOST:PORT
		var c net.Conn
		c, err = net.DialTimeout("tcp", arg(2), 2*time.Second)
		if err == nil {
			c.Close()
		}
	case "serve": // serve PORT TEXT: a dev server: answer every HTTP request on 127.0.0.1:PORT with TEXT, until killed
		var ln net.Listener
		if ln, err = net.Listen("tcp", "127.0.0.1:"+arg(2)); err == nil {
			fmt.Println("listening on", ln.Addr())
			text := arg(3)
			err = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, text) }))
		}
	case "get": // get HOST:PORT: an HTTP GET of http://HOST:PORT/, printing "got: BODY"
		cl := &http.Client{Timeout: 5 * time.Second}
		var resp *http.Response
		if resp, err = cl.Get("http://" + arg(2) + "/"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			fmt.Printf("got: %s\n", body)
			return
		}
	case "dial": // dial SOCKET: connect to a unix socket by its path
		var c net.Conn
		c, err = net.DialTimeout("unix", arg(2), 2*time.Second)
		if err == nil {
			c.Close()
		}
	case "owner": // owner FILE: its uid and gid as this process sees them
		var st syscall.Stat_t
		if err = syscall.Stat(arg(2), &st); err == nil {
			fmt.Printf("uid=%d gid=%d\n", st.Uid, st.Gid)
			return
		}
	case "cat": // cat FILE: print what it reads
		var b []byte
		if b, err = os.ReadFile(arg(2)); err == nil {
			fmt.Printf("read %d bytes: %s\n", len(b), b)
			return
		}
	case "kill": // kill PID: signal 0 asks whether we may signal it
		pid, _ := strconv.Atoi(arg(2))
		err = syscall.Kill(pid, 0)
	case "ptrace": // ptrace PID
		pid, _ := strconv.Atoi(arg(2))
		err = syscall.PtraceAttach(pid)
		if err == nil {
			_ = syscall.PtraceDetach(pid)
		}
	case "settime": // set the clock to what it is
		var tv syscall.Timeval
		_ = syscall.Gettimeofday(&tv)
		err = syscall.Settimeofday(&tv)
	case "module": // finit_module on /dev/null: EPERM before anything else when refused
		f, _ := os.Open("/dev/null")
		_, _, e := syscall.Syscall(unix.SYS_FINIT_MODULE, f.Fd(), 0, 0)
		if e != 0 {
			err = e
		}
	case "mntns": // its mount namespace, as /proc/self/ns/mnt names it
		ns, err := os.Readlink("/proc/self/ns/mnt")
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(ns)
		return
	case "unshare-user":
		err = syscall.Unshare(syscall.CLONE_NEWUSER)
	case "whoami": // who and where it runs: uid, gid, groups, cwd, nice, v2 cgroup, v1 pids and memory cgroups
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
		return
	case "forks": // fork until refused: how many children, and its pids cgroup's count and limit then
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
			if max, err = os.ReadFile(d + "/pids.max"); err == nil {
				cur, _ = os.ReadFile(d + "/pids.current")
				break
			}
		}
		fmt.Printf("forks=%d current=%s max=%s\n", n, strings.TrimSpace(string(cur)), strings.TrimSpace(string(max)))
		return
	case "leave": // leave NAME PORT: a child in its own session holds an abstract unix listener @NAME, TCP and UDP sockets on :PORT and a file TMPDIR/NAME; prints "left netns=... pid=CHILD" and exits
		if os.Getenv("PROBE_HOLD") == "1" {
			fmt.Println("holding")
			os.Stdout.Close()
			for {
				syscall.RawSyscall(syscall.SYS_PAUSE, 0, 0, 0)
			}
		}
		var held []*os.File
		ua, uerr := net.Listen("unix", "@"+arg(2))
		if uerr != nil {
			err = uerr
			break
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
		if err = c.Start(); err != nil {
			break
		}
		line := make([]byte, 8)
		_, _ = io.ReadFull(out, line) // "holding\n": it has them
		n := socketsInUse()
		fmt.Printf("left netns=%s pid=%d sockets=%d\n", netnsID(), c.Process.Pid, n)
		return
	case "netstate": // netstate NAME PORT: its network namespace, the sockets in use in it, whether @NAME and 127.0.0.1:PORT answer, whether TMPDIR/NAME exists
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
		return
	default:
		fmt.Fprintln(os.Stderr, "probe: unknown action "+os.Args[1])
		os.Exit(2)
	}
	// Print the bare error number's text, so callers can match it.
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
