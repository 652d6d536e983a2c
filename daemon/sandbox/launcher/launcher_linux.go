package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() {
	// Everything per-thread (no_new_privs, Landlock, seccomp, the
	// capability sets) is applied to this thread, and exec happens from it.
	runtime.LockOSThread()
}

// Main is termd-launch's main. It returns only on failure.
func Main() int {
	report := os.NewFile(ReportFD, "report")
	fail := func(code int, format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		if report != nil {
			_, _ = report.WriteString(msg)
		} else {
			fmt.Fprintln(os.Stderr, "termd-launch: "+msg)
		}
		return code
	}
	if len(os.Args) != 1 {
		fmt.Fprintln(os.Stderr, "termd-launch is started by termd for each execution; it is not a command to run by hand")
		return 2
	}
	cf := os.NewFile(ConfigFD, "config")
	if cf == nil {
		return fail(ExitConfig, "no configuration descriptor")
	}
	raw, err := io.ReadAll(io.LimitReader(cf, 8<<20))
	cf.Close()
	if err != nil {
		return fail(ExitConfig, "reading the launch configuration: %v", err)
	}
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil || c.Path == "" {
		// An empty read means the daemon went away before releasing us:
		// nothing runs.
		return fail(ExitConfig, "launch configuration missing or invalid (%d bytes): %v", len(raw), err)
	}
	if err := confine(&c); err != nil {
		return fail(ExitConfine, "%v", err)
	}
	err = syscall.Exec(c.Path, c.Argv, c.Env)
	return fail(ExitConfine, "exec %s: %v", c.Path, err)
}

func confine(c *Config) error {
	if len(c.Mounts) > 0 {
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("sandbox: making the mount namespace private: %w", err)
		}
		for _, m := range c.Mounts {
			if err := applyMount(m); err != nil {
				return err
			}
		}
		// The working directory was entered before the mounts: enter it
		// again so that it is seen through them.
		if wd, err := os.Getwd(); err == nil {
			if err := unix.Chdir(wd); err != nil {
				return fmt.Errorf("sandbox: re-entering the working directory %s: %w", wd, err)
			}
		}
	}
	ppid := os.Getppid()
	if c.DropCaps {
		if err := dropBounding(); err != nil {
			return err
		}
	}
	if c.SetCred {
		if err := syscall.Setgroups(intsOf(c.Groups)); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
		if err := syscall.Setresgid(int(c.GID), int(c.GID), int(c.GID)); err != nil {
			return fmt.Errorf("setresgid %d: %w", c.GID, err)
		}
		if err := syscall.Setresuid(int(c.UID), int(c.UID), int(c.UID)); err != nil {
			return fmt.Errorf("setresuid %d: %w", c.UID, err)
		}
		// A credential change clears the parent-death signal: set it again,
		// and give up if termd is already gone.
		if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", err)
		}
		if os.Getppid() != ppid {
			return errors.New("termd went away while the command was starting")
		}
	}
	if c.DropCaps {
		if err := clearCaps(); err != nil {
			return err
		}
	}
	if c.NoNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("sandbox: no_new_privs: %w", err)
		}
	}
	if c.RulesetFD >= 0 {
		if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(c.RulesetFD), 0, 0); e != 0 {
			return fmt.Errorf("sandbox: landlock_restrict_self: %w", e)
		}
		unix.Close(c.RulesetFD)
	}
	if len(c.Seccomp) > 0 {
		prog := unix.SockFprog{Len: uint16(len(c.Seccomp)), Filter: (*unix.SockFilter)(unsafe.Pointer(&c.Seccomp[0]))}
		if _, _, e := unix.Syscall(unix.SYS_SECCOMP, 1 /* SECCOMP_SET_MODE_FILTER */, 0, uintptr(unsafe.Pointer(&prog))); e != 0 {
			return fmt.Errorf("sandbox: installing the seccomp filter: %w", e)
		}
	}
	// Nothing but stdin, stdout and stderr reaches the command; the report
	// descriptor closes at exec, which is how the daemon learns it worked.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("close_range: %w", err)
	}
	return nil
}

func intsOf(v []uint32) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// applyMount opens m.Path without following symbolic links and changes what
// is mounted there in this (private) namespace.
func applyMount(m Mount) error {
	target, err := unix.Openat2(unix.AT_FDCWD, m.Path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOENT) {
		return nil // gone since the plan was checked: nothing to cover
	}
	if err != nil {
		return fmt.Errorf("sandbox: opening %s to protect it (a symbolic link in its path is refused): %w", m.Path, err)
	}
	defer unix.Close(target)
	var st unix.Stat_t
	if err := unix.Fstat(target, &st); err != nil {
		return fmt.Errorf("sandbox: stat %s: %w", m.Path, err)
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	var tree int
	switch m.Kind {
	case "readonly":
		tree, err = unix.OpenTree(target, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	case "hide":
		if isDir {
			tree, err = emptyDir()
		} else {
			tree, err = unix.OpenTree(unix.AT_FDCWD, "/dev/null", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		}
	default:
		return fmt.Errorf("sandbox: unknown mount kind %q", m.Kind)
	}
	if err != nil {
		return fmt.Errorf("sandbox: preparing the %s mount for %s: %w", m.Kind, m.Path, err)
	}
	defer unix.Close(tree)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("sandbox: making %s read-only: %w", m.Path, err)
	}
	if err := unix.MoveMount(tree, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("sandbox: mounting over %s: %w", m.Path, err)
	}
	return nil
}

// emptyDir is a detached, empty, read-only tmpfs.
func emptyDir() (int, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fs)
	for k, v := range map[string]string{"size": "4k", "nr_inodes": "1", "mode": "0555"} {
		if err := unix.FsconfigSetString(fs, k, v); err != nil {
			return -1, fmt.Errorf("tmpfs %s=%s: %w", k, v, err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, err
	}
	return unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
}

// dropBounding empties the capability bounding set (needs CAP_SETPCAP, so it
// runs before the credentials change): after exec nobody, not even uid 0,
// gets a capability back.
func dropBounding() error {
	for c := 0; c <= 63; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			return fmt.Errorf("sandbox: dropping capability %d from the bounding set: %w", c, err)
		}
	}
	return nil
}

// clearCaps empties the ambient and inheritable sets of this thread.
func clearCaps() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("sandbox: clearing ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("sandbox: capget: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("sandbox: clearing inheritable capabilities: %w", err)
	}
	return nil
}
