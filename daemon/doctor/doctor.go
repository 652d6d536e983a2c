// Package doctor checks a termd installation and explains what it finds:
// kernel features, socket and state permissions, key files, policy and config
// validity, role separation, the adviser's configuration and whether the
// daemon answers. Every finding is OK, WARN or FAIL with a one-line
// explanation and, unless OK, a fix.
package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/client"
	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/credentials"
	"github.com/termd/termd/daemon/egress"
	"github.com/termd/termd/daemon/otlpexport"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/daemon/sandbox"
	"github.com/termd/termd/internal/loopback"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Status of one check.
type Status string

const (
	OK   Status = "OK"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

// Check is one finding.
type Check struct {
	Area    string `json:"area"`
	Status  Status `json:"status"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// Options say what to check.
type Options struct {
	// Config is the configuration to check (defaults applied). When the file
	// was invalid, ConfigErr says why and Config holds what could be read.
	Config    *config.Config
	ConfigErr error
	// Timeout bounds the reachability check (default 2s).
	Timeout time.Duration
}

// Run performs every check.
func Run(o Options) []Check {
	var cs []Check
	add := func(area string, st Status, msg, fix string) {
		cs = append(cs, Check{Area: area, Status: st, Message: msg, Fix: fix})
	}
	c := o.Config
	if o.ConfigErr != nil {
		add("config", Fail, "config is invalid: "+oneLine(o.ConfigErr.Error()), "fix the key named above (docs/CONFIG.md lists every key); termd refuses to start with it")
	} else if c.Source != "" {
		add("config", OK, "config "+c.Source+" is valid", "")
	} else {
		add("config", OK, "no config file: built-in defaults (valid)", "")
	}
	if c == nil {
		return cs
	}
	cs = append(cs, kernelChecks()...)
	cs = append(cs, sandboxCheck(c))
	if os.Geteuid() == 0 && runtime.GOOS == "linux" {
		cs = append(cs, rootMapCheck(c))
	}
	cs = append(cs, fileChecks(c)...)
	cs = append(cs, policyCheck(c))
	cs = append(cs, roleChecks(c)...)
	cs = append(cs, adviserChecks(c)...)
	cs = append(cs, credentialChecks(c)...)
	cs = append(cs, storageCheck(c))
	cs = append(cs, homeChecks(c, daemonUID(c))...)
	cs = append(cs, egressCheck(c))
	if c.MetricsListen != "" {
		add("metrics", OK, "Prometheus metrics on http://"+c.MetricsListen+"/metrics (loopback only)", "")
	} else {
		add("metrics", OK, "metrics off (set metrics_listen: 127.0.0.1:9464 to enable)", "")
	}
	cs = append(cs, exportCheck(c))
	cs = append(cs, tlsChecks(c)...)
	cs = append(cs, reachable(c.Socket, o.Timeout))
	return cs
}

// exportCheck says whether receipts go out over OTLP and how far behind
// the exporter is, from what the daemon last wrote in the state directory.
func exportCheck(c *config.Config) Check {
	set, err := otlpexport.Resolve(c.Export.OTLP, os.Getenv)
	if err != nil {
		return Check{Area: "export", Status: Fail, Message: "OTLP export: " + oneLine(err.Error()), Fix: "fix the value named above (docs/EXPORT.md); termd refuses to start with it"}
	}
	st, serr := otlpexport.ReadStatus(c.StateDir)
	if serr != nil {
		if errors.Is(serr, fs.ErrNotExist) {
			msg := "OTLP export " + set.Why
			if set.Enabled {
				msg += " (as this shell's environment sees it); termd has not exported yet"
			}
			return Check{Area: "export", Status: OK, Message: msg}
		}
		return Check{Area: "export", Status: Warn, Message: "OTLP export status unreadable: " + oneLine(serr.Error()), Fix: "termd rewrites it while it exports; remove it if it persists"}
	}
	msg := fmt.Sprintf("OTLP export to %s (%s): %d receipt(s) behind (acknowledged through seq %d of %d, as of %s)",
		st.Endpoint, st.Protocol, st.Lag(), st.ExportedSeq, st.HeadSeq, st.Updated.Local().Format(time.RFC3339))
	if st.Skipped > 0 {
		msg += fmt.Sprintf("; %d receipt(s) were pruned before they could be exported", st.Skipped)
	}
	if st.LastError != "" && st.LastErrorAt.After(st.LastSuccessAt) {
		return Check{Area: "export", Status: Warn, Message: msg + "; failing since " + st.LastErrorAt.Local().Format(time.RFC3339) + ": " + oneLine(st.LastError),
			Fix: "make the collector at " + st.Endpoint + " reachable; the receipts wait in the chain and go out when it answers (termd retries with backoff)"}
	}
	if st.Skipped > 0 {
		return Check{Area: "export", Status: Warn, Message: msg, Fix: "prune only receipts the backend holds (termd_otlp_export_lag_receipts on /metrics is 0)"}
	}
	return Check{Area: "export", Status: OK, Message: msg}
}

// Failed reports whether any check failed.
func Failed(cs []Check) bool {
	for _, c := range cs {
		if c.Status == Fail {
			return true
		}
	}
	return false
}

// WriteText prints one line per check (and its fix, indented).
func WriteText(w io.Writer, cs []Check) {
	var nw, nf int
	for _, c := range cs {
		fmt.Fprintf(w, "%-4s  %-10s %s\n", c.Status, c.Area, c.Message)
		if c.Fix != "" && c.Status != OK {
			fmt.Fprintf(w, "      %-10s fix: %s\n", "", c.Fix)
		}
		switch c.Status {
		case Warn:
			nw++
		case Fail:
			nf++
		}
	}
	fmt.Fprintf(w, "\n%d checks: %d FAIL, %d WARN\n", len(cs), nf, nw)
}

// WriteJSON prints the checks as a JSON document.
func WriteJSON(w io.Writer, cs []Check) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Checks []Check `json:"checks"`
		Failed bool    `json:"failed"`
	}{cs, Failed(cs)})
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func fileChecks(c *config.Config) []Check {
	var cs []Check
	add := func(area string, st Status, msg, fix string) {
		cs = append(cs, Check{Area: area, Status: st, Message: msg, Fix: fix})
	}
	// Socket and its directory.
	dir := filepath.Dir(c.Socket)
	if st, err := os.Stat(dir); err != nil {
		add("socket", Warn, "socket directory "+dir+" does not exist (termd is not running here, or uses another --socket)", "start termd (systemctl start termd.socket) or pass --socket PATH to doctor")
	} else {
		perm := st.Mode().Perm()
		switch {
		case perm&0o002 != 0:
			add("socket", Fail, fmt.Sprintf("socket directory %s has mode %04o: anyone may replace the socket", dir, perm), "chmod 750 "+dir)
		case perm != 0o750:
			add("socket", Warn, fmt.Sprintf("socket directory %s has mode %04o; termd makes it 0750 (group may reach the socket, others may not)", dir, perm), "chmod 750 "+dir)
		default:
			add("socket", OK, fmt.Sprintf("socket directory %s has mode 0750", dir), "")
		}
	}
	if st, err := os.Lstat(c.Socket); err != nil {
		add("socket", Warn, "no socket at "+c.Socket+": termd is not listening there", "start termd (systemctl start termd.socket), or pass --socket PATH to doctor")
	} else if st.Mode()&os.ModeSocket == 0 {
		add("socket", Fail, c.Socket+" exists and is not a socket; termd cannot listen there", "remove it or choose another socket path")
	} else {
		perm := st.Mode().Perm()
		grp := groupOf(st)
		switch {
		case perm&0o007 != 0:
			add("socket", Fail, fmt.Sprintf("socket %s has mode %04o: any local user may connect", c.Socket, perm), "chmod 660 "+c.Socket+" (termd sets 0660 itself; check SocketMode= in termd.socket)")
		case perm != 0o660:
			add("socket", Warn, fmt.Sprintf("socket %s has mode %04o, expected 0660", c.Socket, perm), "chmod 660 "+c.Socket)
		default:
			add("socket", OK, fmt.Sprintf("socket %s has mode 0660, group %s", c.Socket, grp), "")
		}
		if c.SocketGroup != "" && grp != c.SocketGroup && strconv.Itoa(int(gidOf(st))) != c.SocketGroup {
			add("socket", Warn, fmt.Sprintf("socket group is %s, but socket_group is %s", grp, c.SocketGroup), "restart termd, or set SocketGroup= in termd.socket to match")
		}
	}
	// State directory and key files.
	if st, err := os.Stat(c.StateDir); err != nil {
		add("state", Warn, "state directory "+c.StateDir+" does not exist yet (termd creates it 0700 at first start)", "start termd once, or pass --state-dir DIR to doctor")
	} else {
		perm := st.Mode().Perm()
		if perm&0o077 != 0 {
			add("state", Fail, fmt.Sprintf("state directory %s has mode %04o: receipts and keys are reachable by others", c.StateDir, perm), "chmod 700 "+c.StateDir)
		} else {
			add("state", OK, fmt.Sprintf("state directory %s has mode %04o", c.StateDir, perm), "")
		}
		if uid := uidOf(st); uid != uint32(os.Geteuid()) {
			add("state", Warn, fmt.Sprintf("state directory is owned by uid %d, not by this user (%d): doctor may not see everything", uid, os.Geteuid()), "run termd doctor as the user termd runs as")
		}
	}
	keyDir := filepath.Join(c.StateDir, "keys")
	var missing, good []string
	for _, k := range []string{"receipt-ed25519.pem", "receipt-hmac.key", "receipt-digest.key"} {
		p := filepath.Join(keyDir, k)
		st, err := os.Lstat(p)
		switch {
		case os.IsNotExist(err):
			missing = append(missing, k)
		case err != nil:
			add("keys", Warn, "cannot inspect "+p+": "+err.Error(), "run termd doctor as the user termd runs as")
		case !st.Mode().IsRegular():
			add("keys", Fail, p+" is not a regular file; termd refuses to start", "replace it with the real key file (mode 0600)")
		case st.Mode().Perm()&0o077 != 0:
			add("keys", Fail, fmt.Sprintf("key file %s has mode %04o: others may read or change the receipt signing key; termd refuses to start", p, st.Mode().Perm()), "chmod 600 "+p+" (and rotate the key if others could read it: termctl receipts rotate-key)")
		default:
			good = append(good, k)
		}
	}
	if len(good) > 0 {
		add("keys", OK, fmt.Sprintf("key files %s are mode 0600 or stricter", strings.Join(good, ", ")), "")
	}
	if len(missing) == 3 {
		add("keys", OK, "no receipt keys yet: termd creates them (mode 0600) at first start", "")
	} else if len(missing) > 0 {
		add("keys", Warn, "missing key files "+strings.Join(missing, ", ")+": termd creates new ones, and receipts signed by the old ones no longer verify with them", "restore them from backup if you have one")
	}
	return cs
}

func policyCheck(c *config.Config) Check {
	if c.Policy == "" {
		p := policy.Default()
		return Check{Area: "policy", Status: OK, Message: "embedded default policy (version " + p.Version() + "; " + sandboxedWrites(p) + ")"}
	}
	p, err := policy.LoadFile(c.Policy)
	if err != nil {
		return Check{Area: "policy", Status: Fail, Message: "policy " + c.Policy + " is invalid: " + oneLine(err.Error()), Fix: "fix the line named above, then `termctl policy lint " + c.Policy + "`; termd refuses to start with it"}
	}
	if st, err := os.Stat(c.Policy); err == nil && st.Mode().Perm()&0o022 != 0 {
		return Check{Area: "policy", Status: Fail, Message: fmt.Sprintf("policy %s has mode %04o: others may change what commands are allowed", c.Policy, st.Mode().Perm()), Fix: "chmod 644 " + c.Policy + " (owned by root)"}
	}
	return Check{Area: "policy", Status: OK, Message: "policy " + c.Policy + " is valid (version " + p.Version() + "; " + sandboxedWrites(p) + ")"}
}

// sandboxedWrites states the policy setting sandboxed_workspace_writes.
func sandboxedWrites(p *policy.Policy) string {
	if p.SandboxedWorkspaceWrites() == policy.SandboxedWritesAsk {
		return "sandboxed_workspace_writes: ask, every write asks in confirm mode"
	}
	return "sandboxed_workspace_writes: allow, plain workspace writes run without approval under a fully enforced sandbox"
}

// roleChecks says plainly when agents and operators share a uid.
// daemonUID is termd's user: the socket's owner, else doctor's own.
func daemonUID(c *config.Config) uint32 {
	if st, err := os.Stat(c.Socket); err == nil {
		return uidOf(st) // the socket belongs to the daemon's user
	}
	return uint32(os.Geteuid())
}

func roleChecks(c *config.Config) []Check {
	var cs []Check
	daemonUID := daemonUID(c)
	ops := map[uint32]string{0: "root (always an operator)"}
	ops[daemonUID] = "termd's own uid (always an operator)"
	for _, u := range c.Roles.Operators.UIDs {
		ops[u] = "listed in roles.operators.uids"
	}
	for _, n := range c.Roles.Operators.Users {
		if u, err := user.Lookup(n); err == nil {
			id, _ := strconv.Atoi(u.Uid)
			ops[uint32(id)] = "listed in roles.operators.users"
		}
	}
	agents := map[uint32]bool{}
	for _, u := range c.Roles.Agents.UIDs {
		agents[u] = true
	}
	for _, n := range c.Roles.Agents.Users {
		if u, err := user.Lookup(n); err == nil {
			id, _ := strconv.Atoi(u.Uid)
			agents[uint32(id)] = true
		}
	}
	shared := false
	for uid := range agents {
		if why, ok := ops[uid]; ok {
			shared = true
			cs = append(cs, Check{Area: "roles", Status: Warn,
				Message: fmt.Sprintf("agents and operators share uid %d (%s): a process of that uid is an operator, so an agent running as it can approve its own plans", uid, why),
				Fix:     "run agents under their own uid and list only that uid under roles.agents"})
		}
	}
	for _, g := range c.Roles.Agents.Groups {
		for _, og := range c.Roles.Operators.Groups {
			if g == og {
				shared = true
				cs = append(cs, Check{Area: "roles", Status: Warn,
					Message: "group " + g + " is listed under both operators and agents: its members are operators",
					Fix:     "give agents a group of their own"})
			}
		}
	}
	if daemonUID != 0 {
		shared = true
		cs = append(cs, Check{Area: "roles", Status: Warn,
			Message: fmt.Sprintf("user mode: termd runs as uid %d and only that uid can connect, so agents and operators share one uid (every caller is an operator; approvals do not separate an agent from you)", daemonUID),
			Fix:     "for separation run the system daemon and start agents as a uid of their own listed under roles.agents"})
	}
	if !shared {
		n := len(agents) + len(c.Roles.Agents.Groups)
		msg := fmt.Sprintf("agents and operators do not share a uid (%d agent principals; unlisted callers get role %s)", n, c.Roles.Default)
		cs = append(cs, Check{Area: "roles", Status: OK, Message: msg})
	}
	return cs
}

func adviserChecks(c *config.Config) []Check {
	a := c.Adviser
	if a.Enabled != nil && !*a.Enabled {
		return []Check{{Area: "adviser", Status: OK, Message: "adviser turned off (adviser.enabled: false)"}}
	}
	var cs []Check
	switch {
	case a.APIKeyFile != "":
		st, err := os.Stat(a.APIKeyFile)
		switch {
		case err != nil:
			cs = append(cs, Check{Area: "adviser", Status: Fail, Message: "adviser.api_key_file " + a.APIKeyFile + ": " + err.Error(), Fix: "create it (mode 0600) or remove the key"})
		case st.Mode().Perm()&0o077 != 0:
			cs = append(cs, Check{Area: "adviser", Status: Fail, Message: fmt.Sprintf("adviser key file %s has mode %04o: others may read the API key; termd refuses to start", a.APIKeyFile, st.Mode().Perm()), Fix: "chmod 600 " + a.APIKeyFile + " and rotate the key"})
		default:
			cs = append(cs, Check{Area: "adviser", Status: OK, Message: "adviser key file " + a.APIKeyFile + " present, mode 0600 or stricter"})
		}
	case a.APIKeyEnv != "" && os.Getenv(a.APIKeyEnv) != "":
		cs = append(cs, Check{Area: "adviser", Status: OK, Message: "adviser key found in $" + a.APIKeyEnv + " (in doctor's environment; the daemon reads its own)"})
	default:
		cs = append(cs, Check{Area: "adviser", Status: OK, Message: "no adviser key ($" + a.APIKeyEnv + " unset, no api_key_file): the adviser is unavailable; policy decides alone"})
	}
	if u, err := url.Parse(a.BaseURL); err == nil {
		loop := loopback.Host(u.Hostname())
		switch {
		case u.Scheme == "https":
			cs = append(cs, Check{Area: "adviser", Status: OK, Message: "adviser base URL " + a.BaseURL + " uses https"})
		case loop:
			cs = append(cs, Check{Area: "adviser", Status: OK, Message: "adviser base URL " + a.BaseURL + " is plain http on loopback"})
		default:
			cs = append(cs, Check{Area: "adviser", Status: Warn, Message: "adviser base URL " + a.BaseURL + " is plain http: the API key and plans cross the network unencrypted", Fix: "use an https:// base URL"})
		}
	}
	return cs
}

func reachable(socket string, timeout time.Duration) Check {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	c, err := client.Dial(socket)
	if err != nil {
		return Check{Area: "daemon", Status: Warn, Message: "cannot reach termd at " + socket + ": " + oneLine(err.Error()), Fix: "start it (systemctl start termd.socket, or termd --config FILE)"}
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	st, err := c.Daemon.GetStatus(ctx, &termdv1.GetStatusRequest{})
	if err != nil {
		msg := oneLine(err.Error())
		if client.Code(err).String() == "PermissionDenied" || client.Code(err).String() == "Unauthenticated" {
			return Check{Area: "daemon", Status: Warn, Message: "termd at " + socket + " answers but refuses this user: " + msg, Fix: "join the socket's group (usermod -aG termd USER) and get a role in termd.yaml"}
		}
		return Check{Area: "daemon", Status: Warn, Message: "termd is not answering at " + socket + ": " + msg, Fix: "start it (systemctl start termd.socket, or termd --config FILE)"}
	}
	return Check{Area: "daemon", Status: OK, Message: fmt.Sprintf("termd %s answers at %s (you are %s, role %s; policy %s)", st.Version, socket, st.Caller.GetName(), strings.ToLower(strings.TrimPrefix(st.Caller.GetRole().String(), "ROLE_")), st.PolicyVersion)}
}

func uidOf(st os.FileInfo) uint32 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Uid
	}
	return 0
}

func gidOf(st os.FileInfo) uint32 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Gid
	}
	return 0
}

func groupOf(st os.FileInfo) string {
	gid := strconv.Itoa(int(gidOf(st)))
	if g, err := user.LookupGroupId(gid); err == nil {
		return g.Name
	}
	return gid
}

// sandboxCheck says how much of every plan's sandbox profile this host and
// config enforce (docs/SANDBOX.md).
// egressCheck lists the egress allow-lists and runs the proxy's whole path
// once (a namespace, the listener inside it, a fetch through it).
func egressCheck(c *config.Config) Check {
	lists, err := c.EgressLists()
	if err != nil {
		return Check{Area: "egress", Status: Fail, Message: oneLine(err.Error()), Fix: "fix the entry named above (docs/SANDBOX.md, Allow-lists)"}
	}
	var names []string
	for n, l := range lists {
		names = append(names, fmt.Sprintf("%s (%d entries)", n, len(l.Hosts())))
	}
	sort.Strings(names)
	what := "allow-lists " + strings.Join(names, ", ")
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		return Check{Area: "egress", Status: Warn, Message: what + "; the egress proxy needs Linux network namespaces and termd running as root: plans with network egress:NAME are refused and package fetches ask for the host network",
			Fix: "run termd as root (system service) on Linux"}
	}
	if err := egress.SelfTest(); err != nil {
		return Check{Area: "egress", Status: Fail, Message: "the egress proxy does not work here: " + oneLine(err.Error()), Fix: "check that termd can create network namespaces (unshare -n true) and listen on 127.0.0.1"}
	}
	return Check{Area: "egress", Status: OK, Message: what + "; proxy checked: listener inside a new network namespace, a fetch through it to a pinned name answered"}
}

func sandboxCheck(c *config.Config) Check {
	sup, mode := sandbox.ForHost(c.SandboxLauncher, c.Sandbox)
	level, detail := sup.Describe(mode)
	switch {
	case level == sandbox.LevelFull:
		return Check{Area: "sandbox", Status: OK, Message: "every execution is confined by the kernel: " + detail}
	case mode == sandbox.Required:
		return Check{Area: "sandbox", Status: Fail, Message: detail, Fix: "fix what is missing, or accept less with sandbox: best_effort in the config (receipts record what was enforced)"}
	}
	return Check{Area: "sandbox", Status: Warn, Message: "executions are not fully confined: " + detail, Fix: "fix what is missing (docs/SANDBOX.md), then use sandbox: required"}
}

// rootMapCheck says whether a command run for root holds an unprivileged
// host uid (root only in its user namespace, the workspace idmapped), or is
// refused unless its plan is privileged (docs/SANDBOX.md).
func rootMapCheck(c *config.Config) Check {
	to := c.RootMapUID
	if to == 0 {
		to = sandbox.DefaultRootMapUID
	}
	sup, mode := sandbox.ForHost(c.SandboxLauncher, c.Sandbox)
	if mode == sandbox.Off {
		return Check{Area: "root commands", Status: Warn, Message: "sandbox: off, so a command run for root holds host root", Fix: "turn the sandbox on (docs/SANDBOX.md)"}
	}
	if err := sandbox.CheckRootMap(sup.Launcher, to, c.Workspaces); err != nil {
		msg := err.Error()
		if rm, ok := err.(*sandbox.RootMapError); ok {
			msg = "a command run for root cannot hold an unprivileged uid instead, so it is refused unless its plan is privileged: " + rm.Why
		}
		return Check{Area: "root commands", Status: Warn, Message: msg, Fix: "put the workspaces on a file system with idmapped mounts (ext4, xfs, btrfs, tmpfs), or plan root's commands as privileged"}
	}
	return Check{Area: "root commands", Status: OK, Message: fmt.Sprintf("a command run for root is uid 0 in a user namespace and uid %d on the host; the workspaces mount idmapped", to)}
}

// storageCheck compares the state directory's free space with
// storage.min_free_bytes (below it termd refuses new executions) and says how
// much the state directory holds.
func storageCheck(c *config.Config) Check {
	var st unix.Statfs_t
	dir := c.StateDir
	if _, err := os.Stat(dir); err != nil {
		dir = filepath.Dir(dir)
	}
	if err := unix.Statfs(dir, &st); err != nil {
		return Check{Area: "storage", Status: Warn, Message: "cannot read the free space of " + dir + ": " + err.Error()}
	}
	free := int64(uint64(st.Bavail) * uint64(st.Bsize))
	var used int64
	_ = filepath.WalkDir(c.StateDir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				used += info.Size()
			}
		}
		return nil
	})
	msg := fmt.Sprintf("state directory holds %s; %s free on its filesystem (floor storage.min_free_bytes %s); receipts budget per principal %s, in all %s a day",
		mib(used), mib(free), mib(c.Storage.MinFreeBytes), mib(c.Storage.PerPrincipalDay), mib(c.Storage.GlobalDay))
	switch {
	case free < c.Storage.MinFreeBytes:
		return Check{Area: "storage", Status: Warn, Message: msg + ": below the floor, new executions are refused", Fix: "free space on that filesystem, or lower storage.min_free_bytes"}
	case free < 2*c.Storage.MinFreeBytes:
		return Check{Area: "storage", Status: Warn, Message: msg + ": close to the floor", Fix: "free space on that filesystem before executions are refused"}
	}
	return Check{Area: "storage", Status: OK, Message: msg}
}

// credentialChecks says, per credential, whether its source can be read
// now: names, sources and problems only, never a value.
func credentialChecks(c *config.Config) []Check {
	var cs []Check
	for _, cr := range c.Credentials {
		where := cr.SourceKind()
		switch where {
		case "file":
			where += " " + cr.File
		case "store":
			where += " " + c.CredentialsFile
		}
		if ok, why := credentials.Readable(cr, c.CredentialsFile); !ok {
			cs = append(cs, Check{Area: "credentials", Status: Warn, Message: "credential " + cr.Name + " (" + where + ") cannot be read now: " + why, Fix: "plans receiving it are refused when they start until this is fixed (docs/CREDENTIALS.md)"})
			continue
		}
		cs = append(cs, Check{Area: "credentials", Status: OK, Message: "credential " + cr.Name + " (" + where + ") is readable"})
		if len(cr.Programs) == 0 {
			cs = append(cs, Check{Area: "credentials", Status: Warn, Message: "credential " + cr.Name + " may be given to any program", Fix: "scope it with programs: [...] (docs/CREDENTIALS.md, residual risk)"})
		}
	}
	return cs
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
