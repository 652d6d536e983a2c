// Package launcher is the small program that confines one execution between
// fork and exec. Go cannot run code in a forked child before exec, so the
// runner starts termd-launch instead of the command; termd-launch reads its
// Config from descriptor 3, applies the confinement the daemon prepared
// (private mounts, credentials, no_new_privs, capability bounding set,
// Landlock, seccomp) to itself, and then execs the command. Whatever it
// cannot do is reported on descriptor 4 and the command is not started:
// the launcher never runs a command with less confinement than it was told.
//
// The launcher is deliberately tiny (it imports only the standard library and
// x/sys) so that it starts in well under a millisecond: the daemon builds the
// Landlock ruleset (bound to the inodes it opened) and assembles the seccomp
// program; the launcher only installs them.
package launcher

import "os"

// Descriptors the launcher receives besides stdin/stdout/stderr.
const (
	ConfigFD = 3 // the JSON Config, read to EOF before anything is done
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

// Config is everything the launcher does, in order.
type Config struct {
	// Mounts: when set the launcher was cloned into a new mount namespace; it
	// makes every mount private (nothing propagates back to the host) and
	// applies these, in order, before dropping privileges.
	Mounts []Mount `json:"mounts,omitempty"`

	// Credentials to switch to (SetCred false: keep the launcher's).
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
	// means none.
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
	// with an empty read-only directory (or /dev/null for a file).
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
