package executions

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"

	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/sandbox"
	"github.com/termd/termd/internal/pathmemo"
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// Mode is the configured sandbox mode, or this host's default: required
// where the kernel can confine (Landlock, or macOS sandbox-exec), best
// effort elsewhere.
func (l *Launches) Mode() sandbox.Mode {
	if m := l.Config().Sandbox; m != "" {
		return sandbox.Mode(m)
	}
	return l.Sandbox.DefaultMode()
}

// Level is how much of every profile this daemon enforces.
func (l *Launches) Level() sandbox.Level { return l.Sandbox.Level(l.Mode()) }

// Enforcer names what confines executions, for the policy's reasons.
func (l *Launches) Enforcer() string {
	switch l.Sandbox.Platform {
	case "linux-landlock":
		return "Landlock"
	case "macos-seatbelt":
		return "Seatbelt"
	}
	return ""
}

// Capability is the sandbox line of the daemon's status.
func (l *Launches) Capability() *termdv1.Capability {
	level, detail := l.Sandbox.Describe(l.Mode())
	return &termdv1.Capability{Name: "sandbox", Available: level == sandbox.LevelFull, Detail: detail}
}

// sandboxFor prepares the sandbox of one execution (s.Launch). It creates
// the execution's private temporary directory (returned, to be removed when
// it ends) and the build caches under HOME.
func (l *Launches) sandboxFor(s *Setup, d policy.Decision, in Start, nw Network, home string, uid, gid int) (*sandbox.Record, string, error) {
	tmp, err := l.Files.PrivateTmp(in.ID, uid, gid)
	if err != nil {
		return nil, "", errdefs.Internal("preparing the command's temporary directory: %v", err)
	}
	for _, rel := range d.Sandbox.CacheDirs() {
		// Made (as the command's user) so a read-only run can fill it.
		if err := l.MkdirOwned(home, rel, uid, gid); err != nil {
			_ = l.Files.RemoveTmp(filepath.Base(tmp))
			return nil, "", errdefs.Precondition("preparing the cache directory %s: %v", filepath.Join(home, rel), err)
		}
	}
	mode := l.Mode()
	launch, rec, err := sandbox.Prepare(d.Sandbox, l.sandboxPaths(mode, d, nw, home, tmp, uid, in.Paths), mode, l.Sandbox)
	if err == nil && nw.Fallback != "" {
		rec.Missing = append(rec.Missing, nw.Fallback)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		var refused *sandbox.RefusedError
		var rootMap *sandbox.RootMapError
		if errors.As(err, &refused) || errors.As(err, &rootMap) {
			return nil, "", errdefs.Precondition("%v", err)
		}
		return nil, "", errdefs.Internal("%v", err)
	}
	s.Launch = launch
	return &rec, tmp, nil
}

// sandboxPaths are what an execution's sandbox confines it to and hides
// from it. With the sandbox off there are none to compute: Prepare reads
// none of them then (its record says the sandbox is off), and the hidden
// paths cost a glob of /etc/ssh and a few lookups per execution.
func (l *Launches) sandboxPaths(mode sandbox.Mode, d policy.Decision, nw Network, home, tmp string, uid int, memo pathmemo.Memo) sandbox.Paths {
	if mode == sandbox.Off {
		return sandbox.Paths{}
	}
	cfg, pol := l.Config(), l.Policy.Current()
	paths := sandbox.Paths{
		Workspaces:     cfg.Workspaces,
		SystemRead:     pol.SystemRead(),
		Home:           home,
		Tmp:            tmp,
		Cwd:            d.Cwd,
		Hidden:         l.hiddenPaths(cfg),
		ProtectedNames: pol.ProtectedNames(),
		ProtectedDirs:  pol.ProtectedDirs(),
		Terminal:       d.TTY != nil,
		RootMap:        RootMap(cfg, uid, d.Privileged),
		NetNS:          nw.Loopback,
		Memo:           memo,
	}
	if nw.Egress {
		paths.NetNS = true // its own namespace, with the proxy: Landlock leaves TCP to it
	}
	return paths
}

// RootMap is the unprivileged host uid a command that runs as uid (0:
// root) holds instead (sandbox.Paths.RootMap), or 0 when it keeps uid: it
// is not root, termd is not root, or the plan is privileged (a person
// approved a run as real root). Invariant 12: no execution holds host root
// unless a person approved exactly that.
func RootMap(cfg *config.Config, uid int, privileged bool) uint32 {
	if uid != 0 || privileged || os.Geteuid() != 0 || runtime.GOOS != "linux" {
		return 0
	}
	if m := cfg.RootMapUID; m != 0 {
		return m
	}
	return sandbox.DefaultRootMapUID
}

// hiddenPaths are HiddenPaths and the host file system's private paths
// for one execution. What follows from the config alone is made once per
// config (a reload brings a new one) and command base; the host's ssh keys
// are globbed again for each execution, as HiddenPaths does.
func (l *Launches) hiddenPaths(cfg *config.Config) []string {
	base := l.Files.Base()
	c := l.hidden.Load()
	if c == nil || c.cfg != cfg || c.base != base {
		fixed := append(hiddenFixed(cfg, base), l.Files.PrivatePaths()...)
		c = &hiddenCache{cfg: cfg, base: base, fixed: fixed[:len(fixed):len(fixed)]}
		l.hidden.Store(c)
	}
	return appendHostKeys(c.fixed, cfg, base)
}

// hiddenCache is what hiddenPaths made of one config and command base.
type hiddenCache struct {
	cfg   *config.Config
	base  string
	fixed []string // full: every execution's append copies it
}

// HiddenPaths are termd's own files and the host's well-known secrets,
// which no execution may reach, whatever uid it runs as (a privileged run
// included): covered in its mount namespace wherever a readable root would
// reach them. fsBase is where termd keeps the command homes and TMPDIRs
// (hostfs), which stay reachable.
func HiddenPaths(cfg *config.Config, fsBase string) []string {
	return appendHostKeys(hiddenFixed(cfg, fsBase), cfg, fsBase)
}

// hiddenFixed is HiddenPaths without the host's ssh keys: what the config
// and the command base alone decide.
func hiddenFixed(cfg *config.Config, fsBase string) []string {
	h := []string{cfg.StateDir, cfg.Socket, cfg.Source, cfg.Policy, cfg.Adviser.APIKeyFile, cfg.CredentialsFile}
	h = append(h, cfg.Secrets...)
	for _, c := range cfg.Credentials {
		h = append(h, c.File)
	}
	if dir := filepath.Dir(cfg.Socket); !domain.InsideAny(dir, cfg.Workspaces) && !domain.ContainsAny(dir, cfg.Workspaces) {
		h = append(h, dir)
	}
	// Where the gateway keeps its operator token by default (the daemon's
	// user's $XDG_CONFIG_HOME/termd) and, when termd is root, the host's
	// secrets (a termd that is not root runs commands as its own user, who
	// cannot read them): never a directory that holds a workspace or the
	// command homes.
	var own []string
	if dir, err := os.UserConfigDir(); err == nil {
		own = append(own, filepath.Join(dir, "termd"))
	}
	if os.Geteuid() == 0 {
		own = append(own, hostSecrets...)
	}
	return appendOwn(h, own, cfg, fsBase)
}

// appendHostKeys appends to h, when termd is root, the host's ssh keys as
// they are now (never a workspace's or the command base's).
func appendHostKeys(h []string, cfg *config.Config, fsBase string) []string {
	if os.Geteuid() != 0 {
		return h
	}
	keys, err := filepath.Glob("/etc/ssh/ssh_host_*key")
	if err != nil {
		return h
	}
	return appendOwn(h, keys, cfg, fsBase)
}

// appendOwn appends to h the paths of own that hold neither a workspace
// nor the command base and are in no workspace.
func appendOwn(h, own []string, cfg *config.Config, fsBase string) []string {
	var keep []string
	for _, p := range own {
		if keep == nil {
			keep = append([]string{fsBase}, cfg.Workspaces...)
		}
		if !domain.ContainsAny(p, keep) && !domain.InsideAny(p, cfg.Workspaces) {
			h = append(h, p)
		}
	}
	return h
}

// hostSecrets are files and directories of any Linux host that hold
// secrets of root's: password hashes, root's home (its keys, tokens and
// shell history). ssh host keys are globbed at each execution.
var hostSecrets = []string{"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/root"}

// ReceiptSandbox is the receipt's record of what confined an execution:
// the record sandbox.Prepare made from the plan's profile (its name and
// network) and what it enforced, and whether the execution got its own
// network namespace.
func ReceiptSandbox(r *sandbox.Record, netns bool) *receipt.Sandbox {
	if r == nil {
		return nil
	}
	return &receipt.Sandbox{
		NetworkMode:         r.NetworkMode,
		Profile:             r.Profile,
		Level:               string(r.Level),
		Mode:                string(r.Mode),
		Platform:            r.Platform,
		LandlockABI:         r.LandlockABI,
		Seccomp:             r.Seccomp,
		MountNamespace:      r.MountNS,
		NetworkNamespace:    netns,
		CapabilitiesDropped: r.CapsDropped,
		Missing:             r.Missing,
	}
}

// ReceiptHostIdentity records in r the unprivileged host uid a command
// run for root held (run_as.host_uid), when it was mapped.
func (s *Setup) ReceiptHostIdentity(r *receipt.Receipt) {
	if s.Sandbox == nil || s.Sandbox.RootMappedTo == 0 {
		return
	}
	if r.RunAs == nil {
		r.RunAs = &receipt.RunAs{User: config.UserName(0)}
	}
	r.RunAs.HostUID = int(s.Sandbox.RootMappedTo)
}
