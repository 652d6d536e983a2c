package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/sandbox/launcher"
	"github.com/termd/termd/internal/safefs"
)

// Landlock rights by purpose.
const (
	accessRead  = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	accessExec  = unix.LANDLOCK_ACCESS_FS_EXECUTE
	accessWrite = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_SYM | unix.LANDLOCK_ACCESS_FS_REFER |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE
	// Rights a rule on a file (not a directory) may carry.
	fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// handledFS is every file-system right an ABI knows (all of them are denied
// unless a rule grants them).
func handledFS(abi int) uint64 {
	switch {
	case abi <= 0:
		return 0
	case abi == 1:
		return (1 << 13) - 1
	case abi == 2:
		return (1 << 14) - 1
	case abi <= 4:
		return (1 << 15) - 1
	}
	return (1 << 16) - 1 // ABI 5-8: up to IOCTL_DEV; later rights are not used
}

// Probe says what this host can enforce; launcherPath is termd-launch.
func Probe(launcherPath string) Support {
	s := Support{Platform: "linux-landlock", Launcher: launcherPath}
	switch v, err := landlockABI(); {
	case err == nil:
		s.LandlockABI = v
	case err == unix.EPERM:
		// A kernel without Landlock answers ENOSYS or EOPNOTSUPP; EPERM
		// is a seccomp filter's (nspawn's, Docker's default profile).
		s.LandlockRefused = true
	}
	s.Seccomp = seccomp.Supported()
	caps := effectiveCaps()
	s.MountNS = caps&(1<<unix.CAP_SYS_ADMIN) != 0
	s.NetNS = s.MountNS && exists("/proc/self/ns/net")
	s.CapDrop = caps&(1<<unix.CAP_SETPCAP) != 0
	if os.Geteuid() != 0 && !s.MountNS && unprivilegedUserNS() {
		// User mode: the launcher makes the mount namespace inside a user
		// namespace mapping only termd's own uid, where it may also empty
		// the bounding set.
		s.UserNS, s.MountNS, s.CapDrop = true, true, true
	}
	switch st, err := os.Stat(launcherPath); {
	case launcherPath == "":
		s.LauncherErr = "the termd-launch helper was not found (install it beside termd, or set sandbox_launcher)"
	case err != nil:
		s.LauncherErr = fmt.Sprintf("the termd-launch helper %s cannot be used: %v (install it beside termd, or set sandbox_launcher)", launcherPath, err)
	case st.Mode()&0o111 == 0 || st.IsDir():
		s.LauncherErr = fmt.Sprintf("the termd-launch helper %s is not an executable file", launcherPath)
	}
	return s
}

// unprivilegedUserNS says whether this kernel lets an unprivileged process
// create a user namespace.
func unprivilegedUserNS() bool {
	for file, bad := range map[string]string{
		"/proc/sys/user/max_user_namespaces":                     "0",
		"/proc/sys/kernel/unprivileged_userns_clone":             "0",
		"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1",
	} {
		if b, err := os.ReadFile(file); err == nil && strings.TrimSpace(string(b)) == bad {
			return false
		}
	}
	return exists("/proc/self/ns/user")
}

func effectiveCaps() uint64 {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0
	}
	return uint64(data[0].Effective) | uint64(data[1].Effective)<<32
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// DefaultLauncher is termd-launch beside the running binary.
func DefaultLauncher() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return filepath.Join(filepath.Dir(exe), launcher.ArgvZero)
}

// Prepare builds the confinement of one execution. Under Required it refuses
// (with what is missing and how to proceed) when the host cannot enforce the
// profile fully; under BestEffort it enforces what it can; under Off it
// returns no Launch. rootRun says the command keeps uid 0.
func Prepare(p domain.Profile, paths Paths, mode Mode, sup Support) (*launcher.Launch, Record, error) {
	rec, done, err := begin(p, mode, sup)
	if done || err != nil {
		return nil, rec, err
	}
	missing := sup.Missing()
	if len(missing) > 0 && mode == Required {
		return nil, rec, &RefusedError{Missing: missing}
	}
	rec.Missing = missing
	if paths.RootMap != 0 && (sup.LauncherErr != "" || sup.Launcher == "") {
		return nil, rec, &RootMapError{Why: "the termd-launch helper that would map it is missing (" + strings.Join(missing, "; ") + ")"}
	}
	if sup.LauncherErr != "" || sup.Launcher == "" || sup.Platform == "" {
		// Nothing to confine with (best effort): run unconfined, and say so.
		rec.Level = LevelNone
		return nil, rec, nil
	}
	l := &launcher.Launch{Path: sup.Launcher, Config: launcher.Config{RulesetFD: -1}}
	ok := false
	defer func() {
		if !ok {
			l.Close()
		}
	}()
	rules := buildRules(p, paths)
	if sup.LandlockABI > 0 {
		f, err := rulesetFile(rules, p.Network || paths.NetNS, sup.LandlockABI)
		if err != nil {
			if mode == Required {
				return nil, rec, fmt.Errorf("sandbox: building the Landlock ruleset: %w", err)
			}
			rec.Missing = append(rec.Missing, "Landlock ruleset: "+err.Error())
		} else {
			l.Config.RulesetFD = launcher.FirstFD + len(l.Files)
			l.Files = append(l.Files, f)
			rec.LandlockABI = sup.LandlockABI
		}
	}
	if sup.Seccomp {
		prog, err := seccompProgram()
		if err != nil {
			if mode == Required {
				return nil, rec, err
			}
			rec.Missing = append(rec.Missing, err.Error())
		} else {
			l.Config.Seccomp = prog
			rec.Seccomp = true
		}
	}
	mounts := mountsFor(p, paths, rules)
	if paths.RootMap != 0 {
		idmaps, err := mapRoot(l, p, paths, sup)
		if err != nil {
			return nil, rec, err
		}
		mounts = append(idmaps, mounts...)
		rec.RootMappedTo = paths.RootMap
	}
	if len(mounts) > 0 {
		if sup.MountNS {
			l.Config.Mounts = mounts
			l.Config.UserNS = sup.UserNS
			l.NewMountNS = !sup.UserNS
			rec.MountNS = true
		} else if mode == Required {
			return nil, rec, &RefusedError{Missing: []string{"private mount namespaces are not available (termd needs CAP_SYS_ADMIN), and this plan needs read-only or hidden paths inside its roots"}}
		}
	}
	l.Config.NoNewPrivs = true
	if sup.CapDrop && !sup.UserNS {
		l.Config.DropCaps = true
		rec.CapsDropped = true
	} else if sup.UserNS {
		// Without root the command has no capability to drop; inside the
		// launcher's user namespace (when it makes one) the bounding set is
		// emptied too.
		l.Config.DropCaps = len(l.Config.Mounts) > 0
		rec.CapsDropped = true
	}
	rec.Level = LevelFull
	if len(rec.Missing) > 0 {
		rec.Level = LevelPartial
	}
	ok = true
	return l, rec, nil
}

// RefusedError is a refusal because the kernel cannot enforce a profile.
type RefusedError struct{ Missing []string }

func (e *RefusedError) Error() string { return refusedText(e.Missing) }

// rule is one Landlock path-beneath grant.
type rule struct {
	path   string
	access uint64
	// beneath: the rule's directory is in this tree of the principal's (a
	// cache directory in its private HOME) and is opened below it without
	// following any link, so a link swapped in after termd made the
	// directory cannot move the grant elsewhere.
	beneath string
}

// buildRules lists the grants of a profile in its context.
func buildRules(p domain.Profile, ps Paths) []rule {
	var rs []rule
	add := func(access uint64, paths ...string) {
		for _, x := range paths {
			if x != "" {
				rs = append(rs, rule{path: filepath.Clean(x), access: access})
			}
		}
	}
	devWrite := uint64(unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE)
	add(devWrite, "/dev/null", "/dev/zero", "/dev/full")
	if ps.Terminal {
		add(devWrite|unix.LANDLOCK_ACCESS_FS_IOCTL_DEV, "/dev/tty")
	}
	reads := readSet(p, ps)
	add(accessRead, reads...)
	add(accessRead|accessWrite, ps.Tmp)
	switch p.Profile {
	case domain.ReadOnly:
		add(accessRead, ps.Workspaces...)
		add(accessRead, ps.Home)
		add(accessRead|accessExec, p.Exec...)
	case domain.WorkspaceWrite:
		add(accessRead|accessExec, reads...)
		add(accessRead|accessExec|accessWrite, ps.Workspaces...)
		// The private HOME is the principal's own (termd executions only):
		// build caches and tools' state live there.
		add(accessRead|accessExec|accessWrite, ps.Home)
		add(accessExec, ps.Tmp)
		add(accessRead|accessExec, p.Exec...)
	}
	for _, c := range cacheDirs(p, ps) {
		c = filepath.Clean(c)
		r := rule{path: c, access: accessRead | accessWrite}
		if ps.Home != "" && c != filepath.Clean(ps.Home) && within(filepath.Clean(ps.Home), c) {
			r.beneath = filepath.Clean(ps.Home)
		}
		rs = append(rs, r)
	}
	for _, w := range p.Write {
		// An approved target outside the workspace: the file itself when it
		// exists, else the directory it is created in.
		if exists(w) {
			add(accessRead|accessWrite, w)
		} else {
			add(accessRead|accessWrite, filepath.Dir(w))
		}
	}
	return rs
}

// rulesetFile creates the Landlock ruleset from descriptors opened now: the
// rules bind to these inodes, whatever happens to the paths afterwards.
func rulesetFile(rules []rule, network bool, abi int) (*os.File, error) {
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handledFS(abi)}
	if abi >= 4 && !network {
		attr.Handled_access_net = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	if abi >= 6 {
		attr.Scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	fd, err := landlockCreateRuleset(&attr)
	if err != nil {
		return nil, fmt.Errorf("landlock_create_ruleset: %w", err)
	}
	f := os.NewFile(uintptr(fd), "landlock-ruleset")
	for _, r := range mergeRules(rules) {
		pfd, err := openRule(r)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				continue // nothing there to grant
			}
			if r.beneath != "" && errors.Is(err, safefs.ErrNotDir) {
				continue // swapped for a link since termd made it: no grant, and the rest still holds
			}
			f.Close()
			return nil, fmt.Errorf("opening %s: %w", r.path, err)
		}
		err = addRule(fd, pfd, ruleRights(r, attr.Handled_access_fs))
		unix.Close(pfd)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("landlock rule for %s: %w", r.path, err)
		}
	}
	return f, nil
}

// mergeRules joins the rules on one path (opened the same way) into one
// with their rights together, in the order of their first appearance: the
// kernel joins the rights of rules on one inode anyway, and each rule costs
// an open, a rule and a close (the read-only devices are granted by both
// the device rule and the system's read set, a workspace-write profile's
// reads twice).
func mergeRules(rules []rule) []rule {
	type key struct{ path, beneath string }
	at := make(map[key]int, len(rules))
	out := make([]rule, 0, len(rules))
	for _, r := range rules {
		k := key{r.path, r.beneath}
		if i, ok := at[k]; ok {
			out[i].access |= r.access
			continue
		}
		at[k] = len(out)
		out = append(out, r)
	}
	return out
}

// charDevices are the character devices profiles name (the device rules,
// the system read set's random sources): a directory's rights on one are
// refused by the kernel, so they are not asked for.
var charDevices = map[string]bool{"/dev/null": true, "/dev/zero": true, "/dev/full": true, "/dev/tty": true, "/dev/random": true, "/dev/urandom": true}

// ruleRights are the rights r asks of the kernel, of those handled: a
// character device's are only those a file may carry (what addRule would
// have kept after the kernel refused the rest, without the refusal and the
// fstat).
func ruleRights(r rule, handled uint64) uint64 {
	if charDevices[r.path] && r.beneath == "" {
		return r.access & handled & fileRights
	}
	return r.access & handled
}

// addRule grants access beneath the descriptor pfd, without the rights
// only a directory takes when pfd is not one. Whether it is one is asked
// (fstat) only when the rule carries such rights and the kernel refused
// them (EINVAL: a file given directory rights), so a directory's rule and a
// file's file-only rule cost one system call.
func addRule(ruleset, pfd int, access uint64) error {
	if access == 0 {
		return nil
	}
	err := landlockAddPathRule(ruleset, pfd, access)
	if err == nil || access&^fileRights == 0 || !errors.Is(err, unix.EINVAL) {
		return err
	}
	var st unix.Stat_t
	if unix.Fstat(pfd, &st) != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return err
	}
	if access &= fileRights; access == 0 {
		return nil
	}
	return landlockAddPathRule(ruleset, pfd, access)
}

// openRule opens the directory or file a rule grants (the caller closes it).
func openRule(r rule) (int, error) {
	if r.beneath == "" {
		return unix.Open(r.path, unix.O_PATH|unix.O_CLOEXEC, 0)
	}
	h, err := safefs.Open(r.beneath, -1)
	if err != nil {
		return -1, err
	}
	defer h.Close()
	d, err := h.OpenDir(strings.TrimPrefix(r.path, r.beneath+"/"), -1)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Dup(d.Fd())
	d.Close()
	return fd, err
}

// mountsFor lists the read-only binds (protected paths inside writable roots)
// and covers (termd's own files inside readable roots) a plan needs.
func mountsFor(p domain.Profile, ps Paths, rules []rule) []launcher.Mount {
	var out []launcher.Mount
	reach := func(path string, need uint64) bool {
		for _, r := range rules {
			if r.access&need != 0 && within(r.path, path) {
				return true
			}
		}
		return false
	}
	var hidden []string
	memo := realPaths(ps.Memo)
	if memo == nil {
		memo = realPaths{}
	}
	for _, h := range ps.Hidden {
		if h == "" || !filepath.IsAbs(h) {
			continue
		}
		// A path resolved exists: resolve has just looked at each of its
		// components. One that could not be is looked at once more.
		real, err := memo.resolve(h)
		if err == nil {
			h = real
		}
		if reach(h, accessRead|accessWrite|accessExec) && (err == nil || exists(h)) {
			hidden = append(hidden, h)
		}
	}
	for _, h := range uniqSorted(hidden) {
		out = append(out, launcher.Mount{Kind: "hide", Path: h})
	}
	if p.Profile != domain.WorkspaceWrite {
		return out
	}
	var ro, pins []string
	for _, dir := range protectedDirsToScan(ps) {
		names := append(append([]string{".git/hooks", ".git/config", ".git/info", ".termd"}, ps.ProtectedNames...), ps.ProtectedDirs...)
		for _, n := range names {
			x := filepath.Join(dir, n)
			if _, err := os.Lstat(x); err != nil || !reach(x, accessWrite) || isHiddenBy(x, hidden) {
				continue
			}
			ro = append(ro, x)
			// The directories between (.git for .git/hooks) are pinned:
			// renamed, they would take the read-only cover along, and the
			// next execution's plan would find nothing here to protect.
			for p := filepath.Dir(x); p != dir && within(dir, p); p = filepath.Dir(p) {
				pins = append(pins, p)
			}
		}
	}
	for _, x := range uniqSorted(pins) {
		out = append(out, launcher.Mount{Kind: "pin", Path: x})
	}
	for _, x := range uniqSorted(ro) {
		out = append(out, launcher.Mount{Kind: "readonly", Path: x})
	}
	return out
}

func isHiddenBy(p string, hidden []string) bool {
	for _, h := range hidden {
		if within(h, p) {
			return true
		}
	}
	return false
}

var (
	seccompOnce sync.Once
	seccompProg []launcher.SockFilter
	seccompErr  error
)

// Denied system calls (EPERM), whatever the profile: other processes' memory
// and tracing, mounts, kernel modules and kexec, reboot, the clocks, bpf,
// the kernel keyring, io_uring (it bypasses these checks), userfaultfd,
// perf events, namespaces (new user namespaces would give back every
// capability), swap, accounting, quotas, handle-based opens.
var deniedSyscalls = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
	"mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsmount", "fsconfig", "fspick", "mount_setattr",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"bpf", "keyctl", "add_key", "request_key",
	"io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "perf_event_open",
	"setns", "swapon", "swapoff", "acct", "quotactl", "open_by_handle_at", "name_to_handle_at",
	"syslog", "vhangup", "iopl", "ioperm", "lookup_dcookie", "uselib",
}

// seccompProgram is the filter every sandboxed execution gets.
func seccompProgram() ([]launcher.SockFilter, error) {
	seccompOnce.Do(func() {
		const cloneNewUser = unix.CLONE_NEWUSER
		pol := seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{
				{Names: deniedSyscalls, Action: seccomp.ActionErrno},
				{
					// New user or mount namespaces: refused (unshare(2) of
					// anything else, e.g. CLONE_FILES, stays allowed).
					NamesWithCondtions: []seccomp.NameWithConditions{
						{Name: "unshare", Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.BitsSet, Value: cloneNewUser}}},
						{Name: "unshare", Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_NEWNS}}},
						{Name: "clone", Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.BitsSet, Value: cloneNewUser}}},
						{Name: "clone", Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_NEWNS}}},
					},
					Action: seccomp.ActionErrno,
				},
				// clone3 passes its flags in memory a filter cannot read:
				// "not implemented" makes libc and Go fall back to clone.
				{Names: []string{"clone3"}, Action: seccomp.Action(uint32(seccomp.ActionErrno) | uint32(unix.ENOSYS))},
			},
		}
		insts, err := pol.Assemble()
		if err != nil {
			seccompErr = fmt.Errorf("sandbox: assembling the seccomp filter: %w", err)
			return
		}
		raw, err := bpf.Assemble(insts)
		if err != nil {
			seccompErr = fmt.Errorf("sandbox: assembling the seccomp filter: %w", err)
			return
		}
		for _, r := range raw {
			seccompProg = append(seccompProg, launcher.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K})
		}
	})
	return seccompProg, seccompErr
}
