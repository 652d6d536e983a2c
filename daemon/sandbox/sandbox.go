// Package sandbox turns a plan's sandbox profile into confinement the kernel
// enforces. The policy decides the profile (what an execution may read,
// write, execute and reach on the network) from what it already knows about
// the command; this package builds, for each execution, the concrete rules
// from the profile and the daemon's configuration (workspace roots, the
// policy's system read set, the principal's private HOME and temporary
// directory, termd's own files), and hands them to the runner:
//
//   - Linux: a Landlock ruleset built by the daemon from descriptors it opened
//     (rules bind to inodes, so a rename or a symbolic-link swap after the
//     check changes nothing), a seccomp filter, no_new_privs, an empty
//     capability bounding set, and a private mount namespace where read-only
//     binds are needed inside a writable workspace or termd's files lie
//     inside a readable root. The termd-launch helper applies them between
//     fork and exec (package launcher).
//   - macOS: a Seatbelt profile generated from the same rules, run through
//     sandbox-exec.
//
// What was enforced is returned as a Record for the receipt.
package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/internal/pathmemo"
)

// Mode is the operator's choice of how strictly profiles are enforced
// (config key sandbox).
type Mode string

const (
	// Required refuses an execution whose profile the kernel cannot fully
	// enforce.
	Required Mode = "required"
	// BestEffort enforces what the kernel offers and records what was missing.
	BestEffort Mode = "best_effort"
	// Off enforces nothing (receipts say so).
	Off Mode = "off"
)

// ParseMode validates a configured mode.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case Required, BestEffort, Off:
		return Mode(s), nil
	}
	return "", fmt.Errorf("sandbox must be one of required, best_effort, off (got %q)", s)
}

// Level is how much of a profile was enforced.
type Level string

const (
	LevelFull    Level = "full"
	LevelPartial Level = "partial"
	LevelNone    Level = "none"
)

// Support is what this host can enforce.
type Support struct {
	LandlockABI int // 0 = no Landlock
	// LandlockRefused: the kernel has Landlock but this environment refuses
	// its system calls (EPERM: a container's seccomp filter).
	LandlockRefused bool
	Seccomp         bool // seccomp filters can be installed
	MountNS         bool // private mount namespaces (root: CAP_SYS_ADMIN; else a user namespace)
	UserNS          bool // termd is not root: the launcher makes them in an unprivileged user namespace
	NetNS           bool // empty network namespaces
	CapDrop         bool // the capability bounding set can be emptied (CAP_SETPCAP)
	Launcher        string
	LauncherErr     string // why the launcher cannot be used ("" = it can)
	Platform        string // "linux-landlock", "macos-seatbelt", or "" (none)
}

// LandlockRefusedText says that the environment, not the kernel, refuses
// Landlock, and how to allow it.
const LandlockRefusedText = "Landlock is in the kernel but this environment refuses its system calls (EPERM, from a seccomp filter: a container's). " +
	"Allow landlock_create_ruleset, landlock_add_rule and landlock_restrict_self: " +
	"systemd-nspawn --system-call-filter=\"landlock_create_ruleset landlock_add_rule landlock_restrict_self\" (or SystemCallFilter= in the .nspawn file); " +
	"Docker: docker run --security-opt seccomp=PROFILE.json, with Docker's default profile plus the three calls in its allow list; " +
	"Podman: podman run --security-opt seccomp=PROFILE.json (the same profile), or seccomp_profile in containers.conf (docs/OPERATIONS.md, \"Containers\")"

// MinLandlockABI is the ABI full enforcement needs: file-system rights with
// truncate (3), TCP rules (4) and signal/abstract-socket scoping (6).
const MinLandlockABI = 6

// Missing lists what this host lacks for full enforcement, in words, with
// what to do; empty means full enforcement is possible.
func (s Support) Missing() []string {
	var out []string
	if s.Platform == "macos-seatbelt" {
		if s.LauncherErr != "" {
			out = append(out, s.LauncherErr)
		}
		return out
	}
	if s.Platform == "" {
		return []string{"this operating system has no sandbox termd can use (Linux with Landlock or macOS)"}
	}
	if s.LauncherErr != "" {
		out = append(out, s.LauncherErr)
	}
	switch {
	case s.LandlockABI == 0 && s.LandlockRefused:
		out = append(out, LandlockRefusedText)
	case s.LandlockABI == 0:
		out = append(out, "Landlock is not available (Linux 5.13 or later with landlock in the lsm= boot parameter, e.g. lsm=landlock,lockdown,yama,integrity,apparmor)")
	case s.LandlockABI < MinLandlockABI:
		out = append(out, fmt.Sprintf("Landlock ABI %d is too old: signal scoping and TCP rules need ABI %d (Linux 6.12 or later)", s.LandlockABI, MinLandlockABI))
	}
	if !s.Seccomp {
		out = append(out, "seccomp filters are not available (a kernel with CONFIG_SECCOMP_FILTER)")
	}
	if !s.MountNS {
		out = append(out, "private mount namespaces are not available (run termd as root, or allow unprivileged user namespaces: sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone)")
	}
	if !s.CapDrop {
		out = append(out, "capabilities cannot be dropped (run termd as root, or allow unprivileged user namespaces)")
	}
	return out
}

// DefaultMode is the mode used when the config does not name one: required
// where the kernel can confine (Landlock, or macOS sandbox-exec), best
// effort elsewhere.
func (s Support) DefaultMode() Mode {
	if (s.Platform == "linux-landlock" && (s.LandlockABI > 0 || s.LandlockRefused)) || (s.Platform == "macos-seatbelt" && s.LauncherErr == "") {
		return Required
	}
	return BestEffort
}

// Level is the enforcement this host gives under mode m.
func (s Support) Level(m Mode) Level {
	switch {
	case m == Off:
		return LevelNone
	case len(s.Missing()) == 0:
		return LevelFull
	case s.LauncherErr != "" || (s.Platform == "linux-landlock" && s.LandlockABI == 0):
		return LevelNone
	}
	return LevelPartial
}

// Record is what a receipt says about the sandbox of one execution: what
// was enforced, and the profile's name and network (executions.ReceiptSandbox).
type Record struct {
	Profile     string   `json:"profile"`
	NetworkMode string   `json:"network_mode,omitempty"`
	Level       Level    `json:"level"`
	Mode        Mode     `json:"mode"`
	Platform    string   `json:"platform,omitempty"`
	LandlockABI int      `json:"landlock_abi,omitempty"`
	Seccomp     bool     `json:"seccomp"`
	MountNS     bool     `json:"mount_namespace"`
	CapsDropped bool     `json:"capabilities_dropped"`
	Missing     []string `json:"missing,omitempty"`
	// RootMappedTo: the command ran as uid 0 in a user namespace, as this
	// unprivileged uid on the host (Paths.RootMap).
	RootMappedTo uint32 `json:"root_mapped_to,omitempty"`
}

// DefaultRootMapUID is the host uid a command run for root holds when
// sandbox_root_map_uid is not set: in Debian's reserved range (65000-65533),
// beside nobody, which services use and so must not be shared.
const DefaultRootMapUID = 65533

// RootMapError refuses a command run for root that would hold host root
// because the host cannot give it root in a user namespace instead.
type RootMapError struct{ Why string }

func (e *RootMapError) Error() string {
	return "this command would run as root and so hold host root, which only a plan marked privileged may (a person approves each one): " + e.Why +
		". Replan it with --privileged to have it approved as a run as real root, or run it as another user"
}

// Paths is the per-execution context a profile is applied in.
type Paths struct {
	Workspaces []string // workspace roots (real paths)
	SystemRead []string // the policy's system read set (the profile's Read adds to it: readSet)
	Home       string   // the principal's private HOME
	Tmp        string   // the execution's private temporary directory
	Cwd        string   // the execution's working directory (real path)
	// Hidden are termd's own files (state, keys, receipts, config, policy,
	// socket, secrets): covered wherever a readable root would reach them.
	Hidden []string
	// ProtectedNames / ProtectedDirs are the policy's write-protected names
	// (found in the workspace roots and along the working directory).
	ProtectedNames []string
	ProtectedDirs  []string
	// RootMap, when not 0, is the unprivileged host uid (and gid) a command
	// run for root holds (Linux, termd as root): it is uid 0 inside a user
	// namespace mapping 0 to RootMap, with the workspace roots, HOME, TMPDIR
	// and approved write targets mounted idmapped, so files it creates there
	// are root's on the disk. Root's files elsewhere read as another user's
	// and root-only sockets refuse it. 0: the command keeps its uid.
	RootMap uint32
	// NetNS: the execution runs in a network namespace termd made for it
	// and joined it to (the workspace loopback), which reaches nothing
	// outside, so Landlock leaves TCP alone.
	NetNS bool
	// Terminal: the execution runs on a pseudo-terminal, so /dev/tty (its
	// controlling terminal, which pagers open) may be read, written and
	// controlled.
	Terminal bool
	// Memo is the execution's memo of the file system's answers (its
	// policy re-check's), which resolving the hidden paths shares; nil:
	// Prepare keeps its own.
	Memo pathmemo.Memo
}

// readSet is what an execution may read outside its roots (and, under
// workspace-write, execute): the policy's system read set and the reads
// its profile approves.
func readSet(p domain.Profile, ps Paths) []string {
	return append(slices.Clip(ps.SystemRead), p.Read...)
}

// cacheDirs are the profile's cache directories beneath the private HOME.
func cacheDirs(p domain.Profile, ps Paths) []string {
	var out []string
	for _, rel := range p.CacheDirs() {
		out = append(out, filepath.Join(ps.Home, rel))
	}
	return out
}

func uniqSorted(v []string) []string {
	sort.Strings(v)
	out := v[:0]
	for i, s := range v {
		if s != "" && (i == 0 || s != v[i-1]) {
			out = append(out, s)
		}
	}
	return out
}

// within says whether p is root or beneath it.
func within(root, p string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

func refusedText(missing []string) string {
	return "the sandbox cannot be enforced on this host: " + strings.Join(missing, "; ") +
		". Fix the host, or accept less with `sandbox: best_effort` (or `off`) in termd's config; receipts record what was enforced"
}

// protectedDirsToScan: each workspace root, and every directory from the
// working directory up to its root.
func protectedDirsToScan(ps Paths) []string {
	dirs := append([]string(nil), ps.Workspaces...)
	for _, ws := range ps.Workspaces {
		if ps.Cwd == "" || !within(ws, ps.Cwd) {
			continue
		}
		for d := ps.Cwd; within(ws, d) && d != ws; d = filepath.Dir(d) {
			dirs = append(dirs, d)
		}
	}
	return uniqSorted(dirs)
}

// Describe says in one line what a daemon with this support enforces under
// mode m, and what to do when that is less than everything.
func (s Support) Describe(m Mode) (Level, string) {
	level := s.Level(m)
	detail := fmt.Sprintf("%s enforcement (sandbox: %s", level, m)
	if s.Platform != "" {
		detail += ", " + s.Platform
	}
	if s.LandlockABI > 0 {
		detail += fmt.Sprintf(", Landlock ABI %d", s.LandlockABI)
	}
	detail += ")"
	if miss := s.Missing(); len(miss) > 0 && m != Off {
		detail += "; missing: " + strings.Join(miss, "; ")
	}
	if m == Required && level != LevelFull {
		detail += "; every execution is refused until this is fixed (or set sandbox: best_effort)"
	}
	return level, detail
}

// ForHost probes this host with the configured launcher ("" = the default)
// and returns it with the configured mode ("" = the host's default).
func ForHost(launcherPath, mode string) (Support, Mode) {
	if launcherPath == "" {
		launcherPath = DefaultLauncher()
	}
	sup := Probe(launcherPath)
	if mode == "" {
		return sup, sup.DefaultMode()
	}
	return sup, Mode(mode)
}

// begin is what Prepare does first on every platform: a record of the
// attempt, nothing under Off, a refusal of an unknown profile.
func begin(p domain.Profile, mode Mode, sup Support) (rec Record, done bool, err error) {
	rec = Record{Profile: p.Profile, NetworkMode: p.NetworkMode, Mode: mode, Platform: sup.Platform}
	if mode == Off {
		rec.Level = LevelNone
		rec.Missing = []string{"the sandbox is turned off (sandbox: off)"}
		return rec, true, nil
	}
	return rec, false, p.Validate()
}
