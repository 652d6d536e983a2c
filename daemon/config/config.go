// Package config owns the daemon's configuration: the file format, defaults,
// strict validation and the mapping of callers to roles.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/termd/termd/daemon/egress"
	"github.com/termd/termd/internal/loopback"
	"github.com/termd/termd/internal/wire"
	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as "90s", "15m", "1h" in the file.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string and refuses anything else.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a duration such as \"30s\" or \"15m\"", n.Line)
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration (write e.g. \"30s\", \"15m\", \"1h\")", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration back in Go syntax.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Principals lists uids, user names and groups that hold a role.
type Principals struct {
	UIDs   []uint32 `yaml:"uids" doc:"numeric user ids"`
	Users  []string `yaml:"users" doc:"user names, resolved at load"`
	Groups []string `yaml:"groups" doc:"group names or numeric gids; a caller whose primary gid matches, or whose user is a member, holds the role"`
}

// Roles maps callers to operator, agent and viewer.
type Roles struct {
	Operators Principals `yaml:"operators" doc:"may plan, approve, deny, execute, reload policy and see every session; root and the daemon's own uid are always operators"`
	Agents    Principals `yaml:"agents" doc:"may plan and execute plans that need no approval or were approved by someone else; see only their own sessions"`
	Viewers   Principals `yaml:"viewers" doc:"may read sessions, plans and receipts they can see"`
	Default   string     `yaml:"default" doc:"role for callers matched by nothing above: none, viewer or agent" default:"none"`
}

// Sessions bounds sessions.
type Sessions struct {
	IdleTimeout  Duration `yaml:"idle_timeout" doc:"a session with no activity for this long is closed (its execution cancelled)" default:"1h"`
	PerPrincipal int      `yaml:"per_principal" doc:"open sessions one principal may hold" default:"8"`
	Global       int      `yaml:"global" doc:"open sessions across all principals" default:"64"`
	MaxPlans     int      `yaml:"max_plans" doc:"open plans (planned, awaiting approval or approved: not yet run, denied or expired) one session may hold; finished, denied, blocked and expired plans do not count, so a long-lived session never fills up" default:"1000"`
	MaxStreams   int      `yaml:"max_streams" doc:"event streams one principal may have open at once" default:"64"`
	MaxRunning   int      `yaml:"max_running" doc:"commands one principal may have running at once, across its sessions (a session runs several at once: two terminals of one user share it)" default:"8"`
}

// Connections bounds what callers may hold open on termd's socket.
type Connections struct {
	PerUID            int      `yaml:"per_uid" doc:"open connections one uid may hold; past it new connections from that uid are closed at once (other uids are unaffected)" default:"128"`
	Global            int      `yaml:"global" doc:"open connections from non-operators in all; operators (root, termd's uid, roles.operators) may still connect past it, up to their per_uid" default:"1024"`
	HandshakeTimeout  Duration `yaml:"handshake_timeout" doc:"a connection that has not finished the HTTP/2 handshake within this long is closed" default:"10s"`
	IdleTimeout       Duration `yaml:"idle_timeout" doc:"a connection with no call in flight for this long is closed (clients reconnect on their next call)" default:"5m"`
	MaxStreams        int      `yaml:"max_streams" doc:"concurrent calls (streams) one connection may carry" default:"128"`
	MaxMessageBytes   int      `yaml:"max_message_bytes" doc:"largest request message termd accepts" default:"4194304"`
	CallsPerPrincipal int      `yaml:"calls_per_principal" doc:"unary calls one principal (a uid, or a gateway token) may have in flight at once; more are refused at once with RESOURCE_EXHAUSTED; operators are not limited (event streams have sessions.max_streams)" default:"32"`
	AcceptRate        int      `yaml:"accept_rate" doc:"new connections one uid may open per second on the shared socket, in bursts of up to per_uid; past it termd closes them at once, before any other work, so a uid connecting in a loop costs termd little and others still get in (operators are not limited, and have the operator socket)" default:"64"`
}

// Storage bounds what executions may store in the state directory.
type Storage struct {
	PerPrincipalDay int64  `yaml:"per_principal_day" doc:"bytes of receipts (output included) one principal's executions may add in a rolling 24 hours; past it its executions are refused until older ones age out" default:"2147483648"`
	GlobalDay       int64  `yaml:"global_day" doc:"bytes of receipts all executions together may add in a rolling 24 hours" default:"17179869184"`
	MinFreeBytes    int64  `yaml:"min_free_bytes" doc:"free space the state directory's filesystem must keep; below it new executions are refused, so receipts are never cut off by a full disk" default:"536870912"`
	OverBudget      string `yaml:"over_budget" doc:"past per_principal_day or global_day: refuse new executions, or tail: run them but keep only the last tail_bytes of each output stream in the receipt (still counted and hashed in full); the free-space floor always refuses" default:"refuse"`
	TailBytes       int64  `yaml:"tail_bytes" doc:"with over_budget: tail, the bytes of each stream's end kept in the receipt" default:"4096"`
}

// Plans bounds what plans a principal may make termd hold (docs/OPERATIONS.md, Limits).
type Plans struct {
	MaxOpen         int   `yaml:"max_open" doc:"open plans (planned, awaiting approval or approved) one principal may hold across its sessions; past it new plans are refused until some are executed, denied or expire, or their sessions are closed (which expires them)" default:"1000"`
	MaxRequestBytes int   `yaml:"max_request_bytes" doc:"bytes of one plan's request (argv, command, cwd, env and credential names together); a larger request is refused: put long input in a file in the workspace" default:"262144"`
	MaxOpenBytes    int64 `yaml:"max_open_bytes" doc:"request bytes of one principal's open plans together; past it new plans are refused like max_open; a plan's journal record and memory hold its request about eight times over" default:"4194304"`
	MaxJournalBytes int64 `yaml:"max_journal_bytes" doc:"bytes of the plan journal (plans.jsonl) one principal's plans may hold; past it its oldest finished plans are forgotten (their receipts stay), and when its open plans alone fill it, new plans are refused" default:"67108864"`
	KeepFinished    int   `yaml:"keep_finished" doc:"finished plans (run, denied, blocked or expired) kept per principal for plan listings (about 7 KB of memory each); older ones are forgotten from memory and the journal, their receipts stay" default:"200"`
	MaxStdinBytes   int   `yaml:"max_stdin_bytes" doc:"bytes of standard input one plan may carry (termctl run -i, or a pipe; the stdin of CommandRequest); a plan holds them in memory and the journal until it runs, and they count against max_open_bytes; 0 refuses stdin" default:"1048576"`
}

// Approvals bounds approvals.
type Approvals struct {
	TTL Duration `yaml:"ttl" doc:"a plan awaiting approval, or approved but not run, expires after this long" default:"15m"`
	// Grants (remembered approvals, docs/POLICY.md).
	WorkspaceGrantTTL Duration `yaml:"workspace_grant_ttl" doc:"how long a workspace-request grant (this exact request from any session of the principal: it survives an MCP client's restart) lasts when the approval names no --ttl" default:"8h"`
	MaxGrantTTL       Duration `yaml:"max_grant_ttl" doc:"no grant lasts longer than this, whatever its scope or --ttl (session scopes also end with their session)" default:"720h"`
}

// Adviser configures the optional OpenAI-compatible adviser (DeepSeek by default).
type Adviser struct {
	Enabled     *bool    `yaml:"enabled" doc:"set false to turn the adviser off even when a key is present" default:"true"`
	BaseURL     string   `yaml:"base_url" doc:"OpenAI-compatible API base URL" default:"https://api.deepseek.com"`
	Model       string   `yaml:"model" doc:"model name" default:"deepseek-v4-flash"`
	APIKeyEnv   string   `yaml:"api_key_env" doc:"environment variable holding the API key (read per request)" default:"DEEPSEEK_API_KEY"`
	APIKeyFile  string   `yaml:"api_key_file" doc:"file holding the API key; must be mode 0600 or stricter"`
	Timeout     Duration `yaml:"timeout" doc:"overall time limit of one advice request" default:"120s"`
	IdleTimeout Duration `yaml:"idle_timeout" doc:"cancel a stream when no chunk arrives for this long" default:"30s"`
	MaxTokens   int      `yaml:"max_tokens" doc:"maximum tokens in one answer" default:"1024"`
	MaxAttempts int      `yaml:"max_attempts" doc:"attempts for 429/5xx/transport errors (with backoff)" default:"4"`
	History     int      `yaml:"history" doc:"messages of conversation kept per session" default:"20"`
}

// Export sends what termd records to other systems (docs/EXPORT.md).
type Export struct {
	OTLP OTLP `yaml:"otlp" doc:"every signed receipt as an OpenTelemetry log record over OTLP, to a collector or any OTLP backend; the standard OTEL_EXPORTER_OTLP_* environment variables work too, and setting an endpoint (here or there) turns it on. Changes take effect after a restart. See docs/EXPORT.md"`
}

// OTLP configures the OTLP log exporter of receipts (daemon/otlpexport).
// Keys left empty fall back to the OTEL_EXPORTER_OTLP_* environment
// variables, as in every OpenTelemetry SDK; keys set here win over them.
type OTLP struct {
	Enabled    *bool             `yaml:"enabled" doc:"set false to export nothing even when an endpoint is set here or in the environment; true exports only when an endpoint is set" default:"true"`
	Endpoint   string            `yaml:"endpoint" doc:"collector URL, http:// (plain) or https:// (TLS): for grpc http://HOST:4317; for http/protobuf http://HOST:4318 (/v1/logs is added when the URL has no path)" default:"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT; none: export off"`
	Protocol   string            `yaml:"protocol" doc:"grpc or http/protobuf" default:"OTEL_EXPORTER_OTLP_LOGS_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf"`
	Headers    map[string]string `yaml:"headers" doc:"headers sent with every export (e.g. authorization); when set they replace OTEL_EXPORTER_OTLP_HEADERS; a config holding a secret here must be mode 0600" default:"OTEL_EXPORTER_OTLP_LOGS_HEADERS, else OTEL_EXPORTER_OTLP_HEADERS"`
	CAFile     string            `yaml:"ca_file" doc:"PEM file of the CA that signed the collector's certificate (https endpoints)" default:"OTEL_EXPORTER_OTLP_CERTIFICATE, else the system roots"`
	CertFile   string            `yaml:"cert_file" doc:"PEM client certificate for a collector that asks for one (mutual TLS); needs key_file" default:"the file OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE names, else none"`
	KeyFile    string            `yaml:"key_file" doc:"PEM private key of cert_file; must be mode 0600 or stricter" default:"the file OTEL_EXPORTER_OTLP_CLIENT_KEY names, else none"`
	Timeout    Duration          `yaml:"timeout" doc:"time limit of one export request" default:"10s"`
	HostName   string            `yaml:"host_name" doc:"the host name records carry (host.name), so a backend tells hosts apart" default:"the machine's host name"`
	Batch      int               `yaml:"batch" doc:"receipts sent in one export request at most (fewer when they add up to more than 3 MiB); also the most termd holds in memory for export: the rest wait in the receipt store" default:"256"`
	MaxBackoff Duration          `yaml:"max_backoff" doc:"longest wait between retries while the collector cannot be reached or refuses (the wait doubles from 250ms up to this)" default:"30s"`
}

// Egress configures the allow-list proxy (package egress).
type Egress struct {
	AllowLists     map[string][]string `yaml:"allow_lists" doc:"named allow-lists, NAME: [entries]; an entry is a host name (registry.npmjs.org), *.domain (names beneath domain), an IP address or CIDR, each optionally with :PORT or :* (without a port: 80 and 443). A list named like a built-in one replaces it; built in: registries (npm, Go modules, PyPI, crates). Names resolving to loopback, private or link-local addresses are refused unless the address is listed or pinned in hosts" default:"registries"`
	Hosts          map[string]string   `yaml:"hosts" doc:"NAME: ADDRESS pins the proxy's resolution of a name, like /etc/hosts, for air-gapped mirrors and tests; a pinned address is accepted even when it is private (the operator named it). Only the proxy sees it: it does not change name resolution anywhere else"`
	MaxConnections int                 `yaml:"max_connections" doc:"connections one execution may hold open through the proxy at once; past it new ones are refused (too_many_connections)" default:"128"`
}

// EgressLists returns the configured allow-lists over the built-in ones,
// parsed.
func (c *Config) EgressLists() (map[string]*egress.List, error) {
	raw := egress.DefaultLists()
	for name, entries := range c.Egress.AllowLists {
		raw[name] = entries
	}
	out := make(map[string]*egress.List, len(raw))
	for name, entries := range raw {
		l, err := egress.ParseList(name, entries)
		if err != nil {
			return nil, fmt.Errorf("egress.allow_lists: %v", err)
		}
		out[name] = l
	}
	return out, nil
}

// EgressHosts returns egress.hosts parsed.
func (c *Config) EgressHosts() (map[string]netip.Addr, error) {
	out := make(map[string]netip.Addr, len(c.Egress.Hosts))
	for name, addr := range c.Egress.Hosts {
		a, err := netip.ParseAddr(strings.Trim(addr, "[]"))
		if err != nil {
			return nil, fmt.Errorf("egress.hosts: %s: %q is not an IP address", name, addr)
		}
		if _, err := egress.ParseList("hosts", []string{name}); err != nil || strings.ContainsAny(name, "*:/") {
			return nil, fmt.Errorf("egress.hosts: %q is not a host name", name)
		}
		out[egress.NormalizeHost(name)] = a.Unmap()
	}
	return out, nil
}

// Config is the whole daemon configuration file.
type Config struct {
	Socket          string                 `yaml:"socket" doc:"unix socket path; created with mode 0660 in a 0750 directory" default:"$XDG_RUNTIME_DIR/termd/termd.sock, or /run/termd/termd.sock for root"`
	SocketGroup     string                 `yaml:"socket_group" doc:"group that owns the socket (people and agents in it may connect)"`
	OperatorSocket  string                 `yaml:"operator_socket" doc:"a second unix socket that only root and termd's own user can open (mode 0600): operators reach termd on it whatever agents do to the shared socket, and termctl, termd-mcp and termd-gateway use it when they can open it; none turns it off. Clients find it beside the socket by name; elsewhere, tell them with TERMD_OPERATOR_SOCKET" default:"beside socket, with -operator before .sock (termd.sock: termd-operator.sock)"`
	StateDir        string                 `yaml:"state_dir" doc:"receipts, keys and plans live here (mode 0700)" default:"$XDG_STATE_HOME/termd, or /var/lib/termd for root"`
	Policy          string                 `yaml:"policy" doc:"policy file; empty means the embedded default policy"`
	RecipesDir      string                 `yaml:"recipes_dir" doc:"directory of operator recipes (*.yaml, *.yml, *.json; docs/RECIPES.md), read on every list and run; each adds to the built-in catalog or replaces the built-in of the same name; empty: only the built-in catalog"`
	ProjectPolicy   string                 `yaml:"project_policy" doc:"path, relative to each workspace root, of a project policy that may only narrow the system policy for that workspace (kind: project); empty turns project policies off" default:".termd/policy.yaml"`
	Workspaces      []string               `yaml:"workspaces" doc:"workspace roots: commands run only inside these" default:"the current directory"`
	LogLevel        string                 `yaml:"log_level" doc:"debug, info, warn or error" default:"info"`
	LogFormat       string                 `yaml:"log_format" doc:"text or json" default:"text"`
	Roles           Roles                  `yaml:"roles"`
	Sessions        Sessions               `yaml:"sessions"`
	Connections     Connections            `yaml:"connections" doc:"limits on connections to the socket and calls on them (docs/OPERATIONS.md, Limits)"`
	Plans           Plans                  `yaml:"plans" doc:"bounds on the plans each principal may make termd hold in memory and in the plan journal (docs/OPERATIONS.md, Limits)"`
	Storage         Storage                `yaml:"storage" doc:"budgets for receipts and the free-space floor of the state directory (docs/OPERATIONS.md, Storage)"`
	Approvals       Approvals              `yaml:"approvals"`
	ShutdownGrace   Duration               `yaml:"shutdown_grace" doc:"on SIGTERM, running executions get this long to finish before they are ended" default:"10s"`
	ConsoleURL      string                 `yaml:"console_url" doc:"base URL of the web console, used in approval links (e.g. http://127.0.0.1:8765)"`
	PrivatePaths    []string               `yaml:"private_paths" doc:"more files and directories of termd's and the gateway's (the gateway's token file or state directory, log files, the directory of make run): no execution can read them (covered in its mount namespace) and the policy refuses commands that name them, like state_dir"`
	Secrets         []string               `yaml:"secrets" doc:"files whose contents are secrets to redact everywhere (each must be 0600)"`
	Credentials     []Credential           `yaml:"credentials" doc:"named secrets a plan may ask for by name (--credential NAME); each entry: name (GH_TOKEN), one source (file: a path read at each execution, owned by root or termd's user and not group/world readable; value: in this file, which must then be 0600; neither: the entry of that name in credentials_file), programs (names or absolute paths that may receive it; empty: any), principals (uids, users, groups, roles, tokens that may ask; empty: anyone who may plan), inject (env: the variable holds the value; file: a 0600 file in the execution's private TMPDIR, the variable holds its path). See docs/CREDENTIALS.md"`
	GitIdentity     map[string]GitIdentity `yaml:"git_identity" doc:"the git author and committer identity commands get when neither the request nor a git config sets one, by principal: a user name, a numeric uid or token:NAME, mapped to {name, email}; a principal not listed gets NAME (via termd) <NAME@HOST>. It is a config file of the lowest precedence (git's global config where the policy keeps the caller's ~/.gitconfig out, else its system config), so a repository's own user.name and user.email, and GIT_AUTHOR_*/GIT_COMMITTER_* in the request, still win; receipts record it (git_identity)"`
	CredentialsFile string                 `yaml:"credentials_file" doc:"a NAME=value store (one per line, # comments) read at each execution for credentials entries with no value or file; must be mode 0600 or stricter"`
	MetricsListen   string                 `yaml:"metrics_listen" doc:"loopback address for Prometheus metrics (e.g. 127.0.0.1:9464); empty = off"`
	Adviser         Adviser                `yaml:"adviser"`
	Export          Export                 `yaml:"export" doc:"copies of what termd records, sent to other systems (docs/EXPORT.md)"`
	Egress          Egress                 `yaml:"egress" doc:"the allow-list proxy executions with network mode egress:NAME reach the network through (docs/SANDBOX.md, Network)"`
	RunAsRequester  *bool                  `yaml:"run_as_requester" doc:"when termd is root, run commands as the requesting principal's uid/gid" default:"true"`
	Sandbox         string                 `yaml:"sandbox" doc:"how plans' sandbox profiles are enforced: required (refuse an execution the kernel cannot confine fully), best_effort (enforce what the kernel offers, record what was missing), off (no confinement; receipts say so). See docs/SANDBOX.md" default:"required where the kernel has Landlock (or macOS has sandbox-exec), else best_effort"`
	SandboxLauncher string                 `yaml:"sandbox_launcher" doc:"the termd-launch helper that confines each execution (Linux)" default:"termd-launch beside the termd binary"`
	Network         Network                `yaml:"network" doc:"workspace loopbacks and port forwards (docs/SANDBOX.md, Network)"`
	ListenTLS       ListenTLS              `yaml:"listen_tls" doc:"an optional TCP listener with mutual TLS for termd-gateway or termctl on other hosts (off unless address is set): a client certificate maps to a principal as a uid does on the socket (docs/ARCHITECTURE.md, Identity)"`
	RootMapUID      uint32                 `yaml:"sandbox_root_map_uid" doc:"when termd is root (Linux), a command run for root without a privileged plan is uid 0 in a user namespace and this unprivileged uid (and gid) on the host, with the workspace, HOME and TMPDIR mounted idmapped so what it creates there stays root's: pick a uid no account or service uses. See docs/SANDBOX.md" default:"65533"`

	// Source is the file the config came from ("" for defaults only).
	Source string `yaml:"-"`
}

// Network bounds the workspace loopbacks (the network namespace the
// executions of one principal in one workspace share) and port forwards.
type Network struct {
	WorkspaceIdle Duration `yaml:"workspace_idle" doc:"a workspace loopback no execution or port forward uses is removed after this long (what listened in it is gone with its executions anyway)" default:"10m"`
	MaxForwards   int      `yaml:"max_forwards" doc:"port forwards one principal may hold open at once" default:"16"`
}

// GitIdentity is a git author/committer name and email.
type GitIdentity struct {
	Name  string `yaml:"name"`
	Email string `yaml:"email"`
}

// Default returns the configuration used when no file is given.
func Default() *Config {
	t := true
	return &Config{
		LogLevel:  "info",
		LogFormat: "text",
		Roles:     Roles{Default: "none"},
		Sessions: Sessions{
			IdleTimeout:  Duration(time.Hour),
			PerPrincipal: 8,
			Global:       64,
			MaxPlans:     1000,
			MaxStreams:   64,
			MaxRunning:   8,
		},
		Connections: Connections{
			PerUID:            128,
			Global:            1024,
			HandshakeTimeout:  Duration(10 * time.Second),
			IdleTimeout:       Duration(5 * time.Minute),
			MaxStreams:        128,
			MaxMessageBytes:   4 << 20,
			CallsPerPrincipal: 32,
			AcceptRate:        64,
		},
		Plans:          Plans{MaxOpen: 1000, MaxRequestBytes: 256 << 10, MaxOpenBytes: 4 << 20, MaxJournalBytes: 64 << 20, KeepFinished: 200, MaxStdinBytes: 1 << 20},
		Storage:        Storage{PerPrincipalDay: 2 << 30, GlobalDay: 16 << 30, MinFreeBytes: 512 << 20, OverBudget: "refuse", TailBytes: 4096},
		Approvals:      Approvals{TTL: Duration(15 * time.Minute), WorkspaceGrantTTL: Duration(8 * time.Hour), MaxGrantTTL: Duration(30 * 24 * time.Hour)},
		Network:        Network{WorkspaceIdle: Duration(10 * time.Minute), MaxForwards: 16},
		ShutdownGrace:  Duration(10 * time.Second),
		Egress:         Egress{MaxConnections: 128},
		RunAsRequester: &t,
		ProjectPolicy:  ".termd/policy.yaml",
		Export:         Export{OTLP: OTLP{Timeout: Duration(10 * time.Second), Batch: 256, MaxBackoff: Duration(30 * time.Second)}},
		Adviser: Adviser{
			Enabled:     &t,
			BaseURL:     "https://api.deepseek.com",
			Model:       "deepseek-v4-flash",
			APIKeyEnv:   "DEEPSEEK_API_KEY",
			Timeout:     Duration(120 * time.Second),
			IdleTimeout: Duration(30 * time.Second),
			MaxTokens:   1024,
			MaxAttempts: 4,
			History:     20,
		},
	}
}

// Load reads a config file over the defaults. Unknown keys and bad values are
// errors that name the file, line and key.
func Load(path string) (*Config, error) {
	c := Default()
	if path == "" {
		return c, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := Parse(c, data); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c.Source = path
	return c, nil
}

var (
	yamlField = regexp.MustCompile(`field (\S+) not found in type (\S+)`)
	yamlLine  = regexp.MustCompile(`^line (\d+): `)
	yamlKey   = regexp.MustCompile(`^\s*(?:- )?([A-Za-z0-9_]+)\s*:`)
)

// nameKey adds the key found on the reported line, so every error names it.
func nameKey(msg string, data []byte) string {
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil || strings.Contains(msg, "unknown key") {
		return msg
	}
	n, _ := strconv.Atoi(m[1])
	lines := strings.Split(string(data), "\n")
	if n < 1 || n > len(lines) {
		return msg
	}
	if k := yamlKey.FindStringSubmatch(lines[n-1]); k != nil {
		return fmt.Sprintf("line %d: %s: %s", n, k[1], strings.TrimPrefix(msg, m[0]))
	}
	return msg
}

// Parse decodes YAML into c strictly.
func Parse(c *Config, data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		msg := err.Error()
		msg = strings.TrimPrefix(msg, "yaml: unmarshal errors:\n  ")
		msg = yamlField.ReplaceAllStringFunc(msg, func(m string) string {
			key := yamlField.FindStringSubmatch(m)[1]
			if near := closestKey(key); near != "" {
				return fmt.Sprintf("unknown key %q: did you mean %q? (see docs/CONFIG.md for the keys)", key, near)
			}
			return fmt.Sprintf("unknown key %q (see docs/CONFIG.md for the keys)", key)
		})
		return errors.New(nameKey(msg, data))
	}
	return nil
}

// ApplyDefaults fills values that depend on who runs the daemon.
func (c *Config) ApplyDefaults() error {
	root := os.Geteuid() == 0
	if c.Socket == "" {
		if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" && !root {
			c.Socket = wire.UserSocket(rt)
		} else if root {
			c.Socket = wire.SystemSocket
		} else {
			return errors.New("socket: no path given and XDG_RUNTIME_DIR is unset; pass --socket PATH")
		}
	}
	switch c.OperatorSocket {
	case "":
		c.OperatorSocket = wire.OperatorSocket(c.Socket)
	case "none":
		c.OperatorSocket = ""
	}
	if c.StateDir == "" {
		if root {
			c.StateDir = "/var/lib/termd"
		} else if s := os.Getenv("XDG_STATE_HOME"); s != "" {
			c.StateDir = filepath.Join(s, "termd")
		} else if h, err := os.UserHomeDir(); err == nil {
			c.StateDir = filepath.Join(h, ".local", "state", "termd")
		} else {
			return errors.New("state_dir: no path given and no home directory; pass --state-dir DIR")
		}
	}
	if len(c.Workspaces) == 0 {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("workspaces: none given and the current directory is unknown: %w", err)
		}
		c.Workspaces = []string{wd}
	}
	return nil
}

// Validate checks every value and returns the first problem, naming the key.
// The sections are checked in the order below, so the first problem reported
// is the same whichever sections are wrong too.
func (c *Config) Validate() error {
	for _, check := range []func() error{
		c.validatePaths,
		c.validateWorkspaces,
		c.validateLogging,
		c.validateRoles,
		c.validateSessions,
		c.Plans.validate,
		c.Storage.validate,
		c.Connections.validate,
		c.validateTimeouts,
		c.validateEndpoints,
		c.validateSecrets,
		c.validateGitIdentity,
		c.validateCredentials,
		c.ListenTLS.validate,
		func() error { return c.Export.OTLP.validate(c.Source) },
		c.validateEgress,
		c.Adviser.validate,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// intRange is the allowed range of one integer key.
type intRange struct {
	key    string
	v      int
	lo, hi int
}

// checkRanges returns the first value outside its range, naming its key.
func checkRanges(rs ...intRange) error {
	for _, r := range rs {
		if r.v < r.lo || r.v > r.hi {
			return fmt.Errorf("%s: %d is out of range %d..%d", r.key, r.v, r.lo, r.hi)
		}
	}
	return nil
}

// minSecond is a duration key that must be at least one second.
type minSecond struct {
	key string
	v   Duration
}

// checkSeconds returns the first duration under one second, naming its key.
func checkSeconds(ds ...minSecond) error {
	for _, d := range ds {
		if d.v.D() < time.Second {
			return fmt.Errorf("%s: %s is too short (at least 1s)", d.key, d.v.D())
		}
	}
	return nil
}

// checkAtLeastKey refuses a bound that is below the bound of one (lowKey:
// per principal, per uid) or above hi.
func checkAtLeastKey(key string, v int, lowKey string, low, hi int) error {
	if v < low || v > hi {
		return fmt.Errorf("%s: %d must be at least %s (%d) and at most %d", key, v, lowKey, low, hi)
	}
	return nil
}

// checkAbs refuses a path that is set but not absolute.
func checkAbs(key, p string) error {
	if p != "" && !filepath.IsAbs(p) {
		return fmt.Errorf("%s: %q must be an absolute path", key, p)
	}
	return nil
}

// checkHTTPURL refuses a URL that is set but not http(s) with a host.
func checkHTTPURL(key, s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: %q is not an http(s) URL", key, s)
	}
	return nil
}

// checkOneOf refuses a value that is not among the choices.
func checkOneOf(key, v string, choices ...string) error {
	if !slices.Contains(choices, v) {
		return fmt.Errorf("%s: %q is not one of %s", key, v, strings.Join(choices, ", "))
	}
	return nil
}

// validatePaths checks the sandbox mode and the daemon's own paths.
func (c *Config) validatePaths() error {
	if c.Sandbox != "" {
		if err := checkOneOf("sandbox", c.Sandbox, "required", "best_effort", "off"); err != nil {
			return err
		}
	}
	if c.RootMapUID == 1<<32-1 {
		return fmt.Errorf("sandbox_root_map_uid: 4294967295 is not a valid uid; pick an unused uid such as 65533")
	}
	if err := checkAbs("sandbox_launcher", c.SandboxLauncher); err != nil {
		return err
	}
	if err := checkAbs("socket", c.Socket); err != nil {
		return err
	}
	if c.OperatorSocket != "" && c.OperatorSocket != "none" {
		if !filepath.IsAbs(c.OperatorSocket) {
			return fmt.Errorf("operator_socket: %q must be an absolute path (or none)", c.OperatorSocket)
		}
		if filepath.Clean(c.OperatorSocket) == filepath.Clean(c.Socket) {
			return fmt.Errorf("operator_socket: %q is the socket itself; give it a path of its own, or none", c.OperatorSocket)
		}
	}
	for i, p := range c.PrivatePaths {
		if err := checkAbs(fmt.Sprintf("private_paths[%d]", i), p); err != nil {
			return err
		}
	}
	return checkAbs("state_dir", c.StateDir)
}

// validateWorkspaces checks the workspaces, replacing each by its real path,
// then the paths read from them.
func (c *Config) validateWorkspaces() error {
	for i, w := range c.Workspaces {
		if !filepath.IsAbs(w) {
			return fmt.Errorf("workspaces[%d]: %q must be an absolute path", i, w)
		}
		st, err := os.Stat(w)
		if err != nil {
			return fmt.Errorf("workspaces[%d]: %v", i, err)
		}
		if !st.IsDir() {
			return fmt.Errorf("workspaces[%d]: %q is not a directory", i, w)
		}
		real, err := filepath.EvalSymlinks(w)
		if err != nil {
			return fmt.Errorf("workspaces[%d]: %v", i, err)
		}
		if real == "/" {
			return fmt.Errorf("workspaces[%d]: the filesystem root cannot be a workspace", i)
		}
		c.Workspaces[i] = real
	}
	if err := checkAbs("recipes_dir", c.RecipesDir); err != nil {
		return err
	}
	if pp := c.ProjectPolicy; pp != "" && (filepath.IsAbs(pp) || !filepath.IsLocal(pp)) {
		return fmt.Errorf("project_policy: %q must be a path inside the workspace root (relative, no \"..\")", pp)
	}
	return nil
}

func (c *Config) validateLogging() error {
	if err := checkOneOf("log_level", c.LogLevel, "debug", "info", "warn", "error"); err != nil {
		return err
	}
	return checkOneOf("log_format", c.LogFormat, "text", "json")
}

// validateRoles checks the default role and that every named user and group exists.
func (c *Config) validateRoles() error {
	switch c.Roles.Default {
	case "none", "viewer", "agent":
	default:
		return fmt.Errorf("roles.default: %q is not one of none, viewer, agent (operators must be listed explicitly)", c.Roles.Default)
	}
	for _, r := range []struct {
		name string
		p    Principals
	}{{"operators", c.Roles.Operators}, {"agents", c.Roles.Agents}, {"viewers", c.Roles.Viewers}} {
		for _, u := range r.p.Users {
			if _, err := user.Lookup(u); err != nil {
				return fmt.Errorf("roles.%s.users: unknown user %q (create it, or remove it from the list)", r.name, u)
			}
		}
		for _, g := range r.p.Groups {
			if _, err := lookupGroup(g); err != nil {
				return fmt.Errorf("roles.%s.groups: unknown group %q (create it with `groupadd --system %s`, or remove it from the list)", r.name, g, g)
			}
		}
	}
	if c.SocketGroup != "" {
		if _, err := lookupGroup(c.SocketGroup); err != nil {
			return fmt.Errorf("socket_group: unknown group %q (create it with `groupadd --system %s` — `make install` does — or remove socket_group from the config)", c.SocketGroup, c.SocketGroup)
		}
	}
	return nil
}

func (c *Config) validateSessions() error {
	s := c.Sessions
	if err := checkRanges(intRange{"sessions.per_principal", s.PerPrincipal, 1, 10000}); err != nil {
		return err
	}
	if err := checkAtLeastKey("sessions.global", s.Global, "sessions.per_principal", s.PerPrincipal, 100000); err != nil {
		return err
	}
	return checkRanges(
		intRange{"sessions.max_plans", s.MaxPlans, 1, 1000000},
		intRange{"sessions.max_running", s.MaxRunning, 1, 10000},
		intRange{"sessions.max_streams", s.MaxStreams, 1, 100000},
	)
}

func (st Storage) validate() error {
	if st.PerPrincipalDay < 1<<20 || st.GlobalDay < st.PerPrincipalDay || st.MinFreeBytes < 0 {
		return fmt.Errorf("storage: per_principal_day (%d) must be at least 1048576, global_day (%d) at least per_principal_day, min_free_bytes (%d) not negative", st.PerPrincipalDay, st.GlobalDay, st.MinFreeBytes)
	}
	if st.OverBudget != "refuse" && st.OverBudget != "tail" {
		return fmt.Errorf("storage.over_budget %q: choose refuse or tail", st.OverBudget)
	}
	if st.TailBytes < 1 || st.TailBytes > 1<<20 {
		return fmt.Errorf("storage.tail_bytes %d: choose 1 to 1048576", st.TailBytes)
	}
	return nil
}

// validateTimeouts checks the session, network and approval durations.
func (c *Config) validateTimeouts() error {
	if err := checkSeconds(minSecond{"sessions.idle_timeout", c.Sessions.IdleTimeout}); err != nil {
		return err
	}
	if c.Network.WorkspaceIdle.D() <= 0 {
		return fmt.Errorf("network.workspace_idle: %s must be positive, e.g. 10m", c.Network.WorkspaceIdle.D())
	}
	if c.Network.MaxForwards < 1 {
		return fmt.Errorf("network.max_forwards: %d must be at least 1", c.Network.MaxForwards)
	}
	if err := checkSeconds(
		minSecond{"approvals.ttl", c.Approvals.TTL},
		minSecond{"approvals.max_grant_ttl", c.Approvals.MaxGrantTTL},
	); err != nil {
		return err
	}
	if w := c.Approvals.WorkspaceGrantTTL.D(); w < time.Second || w > c.Approvals.MaxGrantTTL.D() {
		return fmt.Errorf("approvals.workspace_grant_ttl: %s must be at least 1s and at most approvals.max_grant_ttl (%s)", w, c.Approvals.MaxGrantTTL.D())
	}
	return nil
}

// validateEndpoints checks the console URL and the metrics listener.
func (c *Config) validateEndpoints() error {
	if err := checkHTTPURL("console_url", c.ConsoleURL); err != nil {
		return err
	}
	if c.MetricsListen != "" {
		loop, err := loopback.Listen(c.MetricsListen)
		if err != nil {
			return fmt.Errorf("metrics_listen: %v", err)
		}
		if !loop {
			return fmt.Errorf("metrics_listen: %q is not a loopback address; metrics are served on loopback only", c.MetricsListen)
		}
	}
	return nil
}

func (c *Config) validateSecrets() error {
	for i, s := range c.Secrets {
		if err := CheckSecretFile(s); err != nil {
			return fmt.Errorf("secrets[%d]: %v", i, err)
		}
	}
	return nil
}

func (c *Config) validateEgress() error {
	if _, err := c.EgressLists(); err != nil {
		return err
	}
	if _, err := c.EgressHosts(); err != nil {
		return err
	}
	return checkRanges(intRange{"egress.max_connections", c.Egress.MaxConnections, 1, 10000})
}

func (a Adviser) validate() error {
	if err := checkHTTPURL("adviser.base_url", a.BaseURL); err != nil {
		return err
	}
	if a.APIKeyFile != "" {
		if err := CheckSecretFile(a.APIKeyFile); err != nil {
			return fmt.Errorf("adviser.api_key_file: %v", err)
		}
	}
	return checkRanges(
		intRange{"adviser.max_tokens", a.MaxTokens, 1, 65536},
		intRange{"adviser.max_attempts", a.MaxAttempts, 1, 10},
		intRange{"adviser.history", a.History, 0, 200},
	)
}

// CheckSecretFile refuses a secret file that others may read.
func CheckSecretFile(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s has mode %#o; a secret file must not be readable by group or others (chmod 600 %s)", path, st.Mode().Perm(), path)
	}
	return nil
}

func lookupGroup(g string) (*user.Group, error) {
	if _, err := strconv.Atoi(g); err == nil {
		return user.LookupGroupId(g)
	}
	return user.LookupGroup(g)
}

func (p Plans) validate() error {
	if err := checkRanges(
		intRange{"plans.max_open", p.MaxOpen, 1, 1000000},
		intRange{"plans.max_request_bytes", p.MaxRequestBytes, 1 << 10, 4 << 20},
	); err != nil {
		return err
	}
	if p.MaxOpenBytes < int64(p.MaxRequestBytes) {
		return fmt.Errorf("plans.max_open_bytes: %d must be at least plans.max_request_bytes (%d)", p.MaxOpenBytes, p.MaxRequestBytes)
	}
	if p.MaxJournalBytes < 4*int64(p.MaxRequestBytes) {
		return fmt.Errorf("plans.max_journal_bytes: %d must be at least 4 x plans.max_request_bytes (%d): a plan's journal record holds its request several times", p.MaxJournalBytes, 4*int64(p.MaxRequestBytes))
	}
	if err := checkRanges(intRange{"plans.keep_finished", p.KeepFinished, 0, 1000000}); err != nil {
		return err
	}
	if p.MaxStdinBytes < 0 || p.MaxStdinBytes > 3<<20 {
		// A request travels in one message (connections.max_message_bytes, 4 MiB by default).
		return fmt.Errorf("plans.max_stdin_bytes: %d is out of range 0..3145728 (3 MiB: a request and its stdin travel in one message)", p.MaxStdinBytes)
	}
	return nil
}

func (c Connections) validate() error {
	if err := checkRanges(intRange{"connections.per_uid", c.PerUID, 4, 100000}); err != nil {
		return err
	}
	if err := checkAtLeastKey("connections.global", c.Global, "connections.per_uid", c.PerUID, 1000000); err != nil {
		return err
	}
	if d := c.HandshakeTimeout.D(); d < 100*time.Millisecond || d > 10*time.Minute {
		return fmt.Errorf("connections.handshake_timeout: %s is out of range 100ms..10m", d)
	}
	if err := checkSeconds(minSecond{"connections.idle_timeout", c.IdleTimeout}); err != nil {
		return err
	}
	return checkRanges(
		intRange{"connections.max_streams", c.MaxStreams, 8, 100000},
		intRange{"connections.calls_per_principal", c.CallsPerPrincipal, 1, 100000},
		intRange{"connections.accept_rate", c.AcceptRate, 1, 1000000},
		intRange{"connections.max_message_bytes", c.MaxMessageBytes, 64 << 10, 64 << 20},
	)
}

// closestKey is the known config key (at any level) nearest to a mistyped
// one, or "" when none is close (at most a third of its letters differ).
func closestKey(typo string) string {
	best, bestD := "", len(typo)/3+1
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			if d := editDistance(strings.ToLower(typo), name); d < bestD {
				best, bestD = name, d
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeOf(Config{}))
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
