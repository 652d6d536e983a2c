// Package launcher is the protocol between termd and termd-launch, the small
// program that confines one execution between fork and exec. Go cannot run
// code in a forked child before exec, so the runner starts termd-launch
// instead of the command; termd-launch reads its Config from descriptor 3,
// applies the confinement the daemon prepared (private mounts, credentials,
// capability bounding set, no_new_privs, Landlock, seccomp) to itself, and
// then, on the go-ahead sent once the execution's intent is durable, execs
// the command. Whatever it cannot do is reported on descriptor 4
// and the command is not started: the launcher never runs a command with
// less confinement than it was told.
//
// termd-launch is C code that runs before the Go runtime starts
// (cmd/termd-launch/launch.c): a Go launcher cost 10-17 ms of runtime start
// per execution on a slow-exec machine. The daemon does everything that needs
// thought (the Landlock ruleset bound to the inodes it opened, the seccomp
// program, the list of mounts); the launcher only applies them.
//
// A launcher may also be started ahead of its execution (Pooled): it then
// gets the plan's descriptors on that socket too.
package launcher

import (
	"encoding/hex"
	"os"
	"strconv"
)

// Descriptors the launcher receives besides stdin/stdout/stderr.
const (
	ConfigFD = 3 // a unix socket: the Config (see Pooled for the protocol), then the go-ahead
	ReportFD = 4 // close-on-exec; a failure message is written here
	FirstFD  = 5 // the first of the extra descriptors the Config refers to
)

// Launch is what the runner needs to start one execution through the
// launcher: the daemon (package sandbox) fills in the confinement, the runner
// adds the command and its credentials to Config and writes it to ConfigFD.
type Launch struct {
	Path       string     // the termd-launch binary
	Config     Config     // confinement; Path, Argv, Env and credentials are set by the runner
	Files      []*os.File // extra descriptors, from FirstFD on
	NewMountNS bool       // clone the launcher into a new mount namespace
	// Prefix: arguments put before the command's path where the launcher
	// is an existing program (macOS: sandbox-exec -p PROFILE).
	Prefix []string
}

// Close releases the descriptors once the launcher has them (or on failure).
func (l *Launch) Close() {
	if l == nil {
		return
	}
	for _, f := range l.Files {
		f.Close()
	}
	l.Files = nil
}

// ArgvZero is the launcher's argv[0] (it is how it shows in ps).
const ArgvZero = "termd-launch"

// Pooled is the one argument of a pre-started launcher: started ahead of
// its execution in a pooled cgroup and network namespace, it waits on
// ConfigFD, a unix socket, for its execution: a 4-byte little-endian length
// carrying the per-plan descriptors (SCM_RIGHTS; they become FirstFD, FirstFD+1,
// ...), that many bytes of Config (Encode), then, once the intent is
// durable, the byte 'g'. It confines itself on receiving the Config, says so
// with the byte 'c' (Confined) on the socket when asked, passes its seccomp
// filter's listener with the byte 'f' (Filter) when asked, and execs the
// command only on 'g'; the end of file at any point before (termd
// let it go, or died) ends it without running anything. A launcher started
// for its execution (argv[0] alone, without the pool) takes the same
// protocol, so it too confines itself while the intent is committed; it
// inherits the plan's descriptors at FirstFD on and is passed none.
const Pooled = "pooled"

// Go is the byte that releases a launcher.
const Go = 'g'

// Confined is the byte a launcher sends, when its Config says SayConfined,
// once it has confined itself (its mount namespace is the command's) and
// waits for Go.
const Confined = 'c'

// Filter is the byte a launcher sends, when its Config says HoldFilter,
// after Confined (if asked for) and before it waits for Go, carrying its
// seccomp filter's listener by SCM_RIGHTS.
const Filter = 'f'

// MaxPassedFDs is how many descriptors a pre-started launcher accepts.
const MaxPassedFDs = 16

// Config is everything the launcher does, in order.
type Config struct {
	// Mounts: when set the launcher was cloned into a new mount namespace; it
	// makes every mount private (nothing propagates back to the host) and
	// applies these, in order, before dropping privileges.
	Mounts []Mount `json:"mounts,omitempty"`
	// UserNS: termd is not root, so the launcher makes its private mount
	// namespace inside a new user namespace that maps only its own uid/gid.
	UserNS bool `json:"userns,omitempty"`
	// UserNSFD: a user namespace (an index into the extra descriptors,
	// FirstFD + n; 0 = none) whose mapping the "idmap" mounts take and
	// which the launcher enters after its mounts, becoming uid 0 in it
	// (unless the credentials say otherwise): a command run for root holds
	// an unprivileged uid on the host (sandbox.RootMap).
	UserNSFD int `json:"userns_fd,omitempty"`
	// NetNSFD: a network namespace (an index into the extra descriptors,
	// FirstFD + n; 0 = none) the launcher joins before anything else: a
	// pre-started launcher, born in a pooled empty namespace, running a plan
	// on a workspace loopback.
	NetNSFD int `json:"netns_fd,omitempty"`
	// SayConfined: the launcher says Confined once it has confined itself
	// (termd waits for it to open the launcher's mount namespace).
	SayConfined bool `json:"say_confined,omitempty"`
	// HoldFilter: the launcher installs its seccomp filter with a listener
	// (SECCOMP_FILTER_FLAG_NEW_LISTENER; the filter never answers
	// SECCOMP_RET_USER_NOTIF, so nothing is ever notified on it) and passes
	// that descriptor to termd (Filter): while termd holds it, the filter
	// outlives the command, so the kernel frees the filter's program (a
	// kernel worker that preempted the command's exit) when termd lets it
	// go, after the result. Where the kernel refuses a listener (before
	// Linux 5.0, or termd itself runs under a filter that has one) the
	// filter is installed without one and nothing is passed.
	HoldFilter bool `json:"hold_filter,omitempty"`
	// MountNS: the launcher makes its private mount namespace itself (a
	// pre-started launcher; an inline one is cloned into a new one).
	MountNS bool `json:"mountns,omitempty"`
	// Cwd: the launcher enters this directory first (a pre-started
	// launcher; an inline one is started in it). "" = stay.
	Cwd string `json:"cwd,omitempty"`
	// SetNice: the launcher sets its nice value to Nice first (a
	// pre-started launcher waits at a low priority).
	SetNice bool `json:"set_nice,omitempty"`
	Nice    int  `json:"nice,omitempty"`

	// Credentials to switch to (SetCred false: keep the launcher's). The
	// launcher takes them whole (a uid without a gid, or a gid or groups
	// without a uid, is refused: it would leave gid 0 under a root termd)
	// and refuses 4294967295, (uid_t)-1, which the kernel reads as
	// "unchanged".
	SetCred bool     `json:"set_cred,omitempty"`
	UID     uint32   `json:"uid"`
	GID     uint32   `json:"gid"`
	Groups  []uint32 `json:"groups,omitempty"`

	// DropCaps empties the capability bounding, inheritable and ambient sets,
	// so the command has no capability even when it runs as uid 0.
	DropCaps bool `json:"drop_caps,omitempty"`
	// NoNewPrivs sets no_new_privs (setuid/setcap programs gain nothing).
	NoNewPrivs bool `json:"no_new_privs,omitempty"`
	// RulesetFD is a Landlock ruleset descriptor (an index into the extra
	// descriptors, FirstFD + n), or -1 for none.
	RulesetFD int `json:"ruleset_fd"`
	// Seccomp is a classic BPF program (struct sock_filter entries); empty
	// means none. The launcher refuses one over BPF_MAXINSNS (4096)
	// instructions rather than let the 16-bit sock_fprog length cut it.
	Seccomp []SockFilter `json:"seccomp,omitempty"`

	// The command.
	Path string   `json:"path"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
}

// Mount is one change to the private mount namespace. Paths are absolute
// real paths; they are opened without following any symbolic link, so a
// link planted after the daemon's checks makes the launch fail instead of
// protecting the wrong file.
type Mount struct {
	// Kind: "readonly" binds Path onto itself read-only; "hide" covers Path
	// with an empty read-only directory (or /dev/null for a file); "idmap"
	// binds Path onto itself idmapped through Config.UserNSFD's mapping;
	// "pin" binds Path onto itself unchanged, so that the command cannot
	// rename or remove it (a mount point, in its mount namespace).
	Kind string `json:"kind"`
	Path string `json:"path"`
}

// SockFilter is one classic BPF instruction.
type SockFilter struct {
	Code uint16 `json:"c"`
	Jt   uint8  `json:"t"`
	Jf   uint8  `json:"f"`
	K    uint32 `json:"k"`
}

// Exit statuses of a launcher that did not exec the command (the report on
// ReportFD says why; these only show when that descriptor was lost).
const (
	ExitConfig  = 125
	ExitConfine = 126
)

// Encode is the wire form termd-launch reads: NUL-terminated key and value
// pairs, in the order they are applied.
func (c Config) Encode() []byte {
	b := make([]byte, 0, c.encodedSize())
	kv := func(k, v string) {
		b = append(b, k...)
		b = append(b, 0)
		b = append(b, v...)
		b = append(b, 0)
	}
	// First: a launcher from an older build refuses the unknown key (and
	// says why) instead of never saying Confined while termd waits for it.
	if c.SayConfined {
		kv("say_confined", "1")
	}
	if c.HoldFilter {
		kv("hold_filter", "1")
	}
	if c.NetNSFD > 0 {
		kv("netns_fd", strconv.Itoa(c.NetNSFD))
	}
	if c.MountNS {
		kv("mountns", "1")
	}
	if c.Cwd != "" {
		kv("cwd", c.Cwd)
	}
	if c.SetNice {
		kv("nice", strconv.Itoa(c.Nice))
	}
	if c.UserNS {
		kv("userns", "1")
	}
	if c.UserNSFD > 0 {
		kv("userns_fd", strconv.Itoa(c.UserNSFD))
	}
	for _, m := range c.Mounts {
		kv(m.Kind, m.Path)
	}
	if c.SetCred {
		kv("uid", strconv.FormatUint(uint64(c.UID), 10))
		kv("gid", strconv.FormatUint(uint64(c.GID), 10))
		for _, g := range c.Groups {
			kv("group", strconv.FormatUint(uint64(g), 10))
		}
	}
	if c.DropCaps {
		kv("drop_caps", "1")
	}
	if c.NoNewPrivs {
		kv("no_new_privs", "1")
	}
	if c.RulesetFD >= 0 {
		kv("ruleset_fd", strconv.Itoa(c.RulesetFD))
	}
	if len(c.Seccomp) > 0 {
		// kv("seccomp", hex of the instructions), written in place.
		b = append(b, "seccomp"...)
		b = append(b, 0)
		for _, f := range c.Seccomp {
			raw := [8]byte{byte(f.Code), byte(f.Code >> 8), f.Jt, f.Jf, byte(f.K), byte(f.K >> 8), byte(f.K >> 16), byte(f.K >> 24)}
			b = hex.AppendEncode(b, raw[:])
		}
		b = append(b, 0)
	}
	kv("path", c.Path)
	for _, a := range c.Argv {
		kv("arg", a)
	}
	for _, e := range c.Env {
		kv("env", e)
	}
	return b
}

// encodedSize is about the length of Encode's result, so that it is made
// in one allocation: its strings and the seccomp program's hex, and room for
// the keys and the numbers.
func (c Config) encodedSize() int {
	n := 256 + len(c.Cwd) + len(c.Path) + 16*len(c.Seccomp) + 24*len(c.Groups)
	for _, m := range c.Mounts {
		n += len(m.Kind) + len(m.Path) + 2
	}
	for _, s := range [][]string{c.Argv, c.Env} {
		for _, a := range s {
			n += len(a) + 5 // "arg\x00" or "env\x00", and its own NUL
		}
	}
	return n
}
