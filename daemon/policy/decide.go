package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/termd/termd/internal/cmdline"
	"github.com/termd/termd/internal/netmode"
	"github.com/termd/termd/internal/program"
)

// Request is what a caller asks to run.
type Request struct {
	Argv    []string          // canonical form; exactly one of Argv / Command
	Command string            // string form, split without expansion
	Cwd     string            // absolute working directory
	Env     map[string]string // additions requested by the caller
	Mode    Mode              // "" = policy default
	Timeout time.Duration     // 0 = policy default; > policy max is denied
	// Sandbox is the profile the caller asks for: "" (the policy's
	// choice), SandboxReadOnly or SandboxWorkspaceWrite.
	Sandbox string
	// TTY asks for a pseudo-terminal (terminal.go); nil: none.
	TTY *Terminal
	// Credentials names the credentials the command receives
	// (credentials.go); their values never reach the policy.
	Credentials []string
	// Privileged asks to run as real host root (no user namespace): the
	// decision then asks, whatever the mode (invariant 12).
	Privileged bool
	// Network is the network asked for (netmode.Parse): "" lets the policy
	// choose.
	Network string
	// Stdin is what the command reads on its standard input, by size and
	// digest (the broker holds the bytes); nil: /dev/null.
	Stdin *Stdin `json:"stdin,omitempty"`
}

// Stdin is a command's standard input by size and SHA-256 (hex). It is part
// of the canonical request: a plan approved for one input runs with no other.
type Stdin struct {
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Context is what the daemon knows, not the caller.
type Context struct {
	Workspaces []string // absolute workspace roots
	Protected  []string // termd's own config/policy/keys/state paths
	Home       string   // the principal's home (may be empty)
	// Sandbox: executions are confined by a fully enforced sandbox profile
	// (termd's sandbox is required or best effort and the kernel has every
	// feature). Project code that stays in the workspace and off the
	// network then runs without approval in confirm mode, and so does a
	// plain write inside the workspace unless the policy's
	// sandboxed_workspace_writes says ask.
	Sandbox bool
	// SandboxBy names what enforces it ("Landlock", "Seatbelt"), for the
	// reasons a decision gives.
	SandboxBy string
	// Credentials are the credentials this caller may ask for, by name
	// (others are "not defined for you", whether they exist or not).
	Credentials map[string]CredentialScope
	// EgressLists are the names of the configured egress allow-lists; nil
	// (no such configuration) accepts any well-formed "egress:NAME", which
	// the daemon then refuses at execution unless it runs an egress proxy.
	EgressLists []string
}

// Step is one stage of a decision, for explain.
type Step struct {
	Name    string `json:"name"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail,omitempty"`
}

// Decision is the policy's answer for one request.
type Decision struct {
	Verdict         Verdict           `json:"verdict"`
	Risk            Risk              `json:"risk"`
	Reasons         []string          `json:"reasons"`
	Rules           []string          `json:"rules"`
	Mode            Mode              `json:"mode"`
	PolicyVersion   string            `json:"policy_version"`
	RequestHash     string            `json:"request_hash"`
	Argv            []string          `json:"argv"`
	ExecArgv        []string          `json:"exec_argv,omitempty"`
	ResolvedPath    string            `json:"resolved_path,omitempty"`
	BinarySHA256    string            `json:"binary_sha256,omitempty"`
	Cwd             string            `json:"cwd,omitempty"`
	Env             map[string]string `json:"env,omitempty"`
	ExecEnv         map[string]string `json:"exec_env,omitempty"`
	Timeout         time.Duration     `json:"timeout"`
	Network         bool              `json:"network"`
	RunsProjectCode bool              `json:"runs_project_code"`
	ReadOnly        bool              `json:"read_only"`
	Writes          []string          `json:"writes,omitempty"`
	// ProjectFiles: digests of the entry files a project-code command reads
	// (Makefile, package.json, ...), bound into the request hash.
	ProjectFiles map[string]string `json:"project_files,omitempty"`
	RunAs        string            `json:"run_as,omitempty"`
	// Sandbox is how the kernel confines the execution.
	Sandbox SandboxProfile `json:"sandbox"`
	// TTY is the terminal the command runs on (sizes defaulted), or nil.
	TTY *Terminal `json:"tty,omitempty"`
	// Credentials are the names of the credentials the command receives,
	// sorted.
	Credentials []string `json:"credentials,omitempty"`
	// Privileged: the command runs as real host root; asked, always.
	Privileged bool `json:"privileged,omitempty"`
	// Stdin is the command's standard input by size and digest, or nil.
	Stdin *Stdin `json:"stdin,omitempty"`
	Steps []Step `json:"steps"`
}

// Input bounds. Oversized input is denied, never truncated then matched.
const (
	MaxArgs      = 256
	MaxArgBytes  = 64 << 10
	MaxTotalArgv = 1 << 20
	MaxEnvVars   = 64
	maxDepth     = 3
)

type decideCtx struct {
	workspaces []string
	protected  []string
	home       string
	sandbox    bool
	sandboxBy  string
	// credentials the caller may ask for (Context.Credentials).
	credentials map[string]CredentialScope
	egressLists []string
	// paths is this decision's memo of the path components it resolved.
	paths pathMemo
}

type state struct {
	d *Decision
}

func (s *state) step(name, outcome, detail string) {
	s.d.Steps = append(s.d.Steps, Step{Name: name, Outcome: outcome, Detail: detail})
}

// raise makes the decision at least v / r, with a reason.
func (s *state) raise(v Verdict, r Risk, reason string) {
	if verdictRank(v) > verdictRank(s.d.Verdict) {
		s.d.Verdict = v
	}
	s.d.Risk = maxRisk(s.d.Risk, r)
	if reason != "" && !contains(s.d.Reasons, reason) {
		s.d.Reasons = append(s.d.Reasons, reason)
	}
}

func (s *state) deny(r Risk, reason string) { s.raise(Deny, r, reason) }

// Decide decides a request. It never panics and always returns a decision.
func (p *Policy) Decide(req Request, ctx Context) (d Decision) {
	defer func() {
		if r := recover(); r != nil {
			d = Decision{Verdict: Deny, Risk: RiskCritical, Reasons: []string{fmt.Sprintf("internal error while deciding: %v", r)}, PolicyVersion: p.version, Mode: req.Mode}
		}
	}()
	dc := &decideCtx{home: ctx.Home, sandbox: ctx.Sandbox, sandboxBy: ctx.SandboxBy, credentials: ctx.Credentials, egressLists: ctx.EgressLists, paths: pathMemo{}}
	for _, w := range ctx.Workspaces {
		if filepath.IsAbs(w) {
			dc.workspaces = append(dc.workspaces, dc.paths.resolve(w, 0))
		}
	}
	for _, w := range ctx.Protected {
		if filepath.IsAbs(w) {
			dc.protected = append(dc.protected, dc.paths.resolve(w, 0))
		}
	}
	d = p.decide(req, dc, 0)
	if req.Privileged {
		// After the mode's adjustment: trusted mode does not waive it.
		d.Privileged = true
		s := &state{d: &d}
		s.raise(Ask, RiskHigh, "privileged: the command runs as real host root (its files, sockets and secrets), not as root in a user namespace; a person approves each such plan, in every mode")
		s.step("privileged", string(d.Verdict), "runs as real host root")
	}
	if req.Stdin != nil {
		in := *req.Stdin
		d.Stdin = &in
	}
	d.RequestHash = hashRequest(p.canonical(d))
	return d
}

// canonRequest is the canonical request: everything an approval approves.
// Its SHA-256 is the request hash that approvals and receipts refer to, so a
// different binary, working directory, environment, limit, mode, policy or
// verdict is a different request.
type canonRequest struct {
	Argv          []string          `json:"argv"`
	ExecArgv      []string          `json:"exec_argv"`
	ResolvedPath  string            `json:"resolved_path"`
	BinarySHA256  string            `json:"binary_sha256"`
	Cwd           string            `json:"cwd"`
	Env           map[string]string `json:"env"`
	ExecEnv       map[string]string `json:"exec_env"`
	Mode          Mode              `json:"mode"`
	TimeoutMS     int64             `json:"timeout_ms"`
	Limits        canonLimits       `json:"limits"`
	Network       bool              `json:"network"`
	RunAs         string            `json:"run_as"`
	PolicyVersion string            `json:"policy_version"`
	Verdict       Verdict           `json:"verdict"`
	Risk          Risk              `json:"risk"`
	ProjectFiles  map[string]string `json:"project_files,omitempty"`
	Sandbox       SandboxProfile    `json:"sandbox"`
	TTY           *canonTerminal    `json:"tty,omitempty"`
	// Credentials by name only; absent when none (so the hash of a request
	// without credentials is what it was before they existed).
	Credentials []string `json:"credentials,omitempty"`
	// Privileged: absent when false (the hash of an ordinary request is
	// what it was before the field existed).
	Privileged bool `json:"privileged,omitempty"`
	// Stdin by size and SHA-256; absent without one (the hash of a request
	// without stdin is what it was before the field existed).
	Stdin *Stdin `json:"stdin,omitempty"`
}

// canonTerminal is a terminal in the canonical request, in the same units
// as the rest of it (milliseconds).
type canonTerminal struct {
	Rows   uint16 `json:"rows"`
	Cols   uint16 `json:"cols"`
	IdleMS int64  `json:"idle_ms"`
}

type canonLimits struct {
	OutputBytes int64 `json:"output_bytes"`
	MemoryBytes int64 `json:"memory_bytes"`
	Pids        int64 `json:"pids"`
	GraceMS     int64 `json:"grace_ms"`
}

// canonical builds the canonical request of a decision.
func (p *Policy) canonical(d Decision) canonRequest {
	l := p.Limits()
	c := canonRequest{
		Argv: d.Argv, ExecArgv: d.ExecArgv, ResolvedPath: d.ResolvedPath, BinarySHA256: d.BinarySHA256,
		Cwd: d.Cwd, Env: d.Env, ExecEnv: d.ExecEnv, Mode: d.Mode, TimeoutMS: d.Timeout.Milliseconds(),
		Limits:  canonLimits{OutputBytes: l.OutputBytes, MemoryBytes: l.MemoryBytes, Pids: l.Pids, GraceMS: l.Grace.Milliseconds()},
		Network: d.Network, RunAs: d.RunAs, PolicyVersion: d.PolicyVersion, Verdict: d.Verdict, Risk: d.Risk,
		ProjectFiles: d.ProjectFiles, Sandbox: d.Sandbox, Credentials: d.Credentials, Privileged: d.Privileged,
		Stdin: d.Stdin,
	}
	if t := d.TTY; t != nil {
		c.TTY = &canonTerminal{Rows: t.Rows, Cols: t.Cols, IdleMS: t.Idle.Milliseconds()}
	}
	if c.Argv == nil {
		c.Argv = []string{}
	}
	if c.ExecArgv == nil {
		c.ExecArgv = []string{}
	}
	if c.ExecEnv == nil {
		c.ExecEnv = map[string]string{}
	}
	return c
}

func hashRequest(c canonRequest) string {
	if c.Env == nil {
		c.Env = map[string]string{}
	}
	if c.Argv == nil {
		c.Argv = []string{}
	}
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (p *Policy) decide(req Request, ctx *decideCtx, depth int) Decision {
	d := Decision{Verdict: Allow, Risk: RiskLow, PolicyVersion: p.version, Rules: []string{}, Reasons: []string{}}
	s := &state{d: &d}

	// --- mode and timeout
	mode := req.Mode
	if mode == "" {
		mode = p.mode
	}
	switch req.Sandbox {
	case "", SandboxReadOnly, SandboxWorkspaceWrite:
	default:
		s.deny(RiskLow, fmt.Sprintf("sandbox %q is not a profile: ask for %s or %s, or leave it empty for the policy's choice", req.Sandbox, SandboxReadOnly, SandboxWorkspaceWrite))
	}
	checkNetwork(req.Network, ctx, s)
	if _, err := ParseMode(string(mode)); err != nil {
		s.deny(RiskLow, err.Error())
		mode = ModeInspect
	}
	if p.project != nil && p.project.DefaultMode != "" && modeRank(mode) > modeRank(p.mode) {
		s.deny(RiskMedium, fmt.Sprintf("mode %s is more permissive than the project policy allows (%s)", mode, p.mode))
	}
	d.Mode = mode
	d.Timeout = req.Timeout
	switch {
	case req.Timeout == 0 && req.TTY != nil && p.limits.MaxTimeout > 0:
		// A terminal is ended by its idle limit while someone uses it:
		// its time limit is the policy's maximum unless it asks for less.
		d.Timeout = p.limits.MaxTimeout
	case req.Timeout == 0:
		d.Timeout = p.limits.DefaultTimeout
	case req.Timeout < 0:
		s.deny(RiskLow, "timeout must not be negative")
	case req.Timeout > p.limits.MaxTimeout:
		s.deny(RiskLow, fmt.Sprintf("timeout %s exceeds the policy maximum %s", req.Timeout, p.limits.MaxTimeout))
	}
	s.step("mode", string(mode), "timeout "+d.Timeout.String())
	d.TTY = p.terminalFor(req.TTY, d.Timeout, s)

	// --- input form and size
	argv := req.Argv
	switch {
	case len(req.Argv) > 0 && req.Command != "":
		s.deny(RiskLow, "send exactly one of argv or command")
		argv = nil
	case req.Command != "":
		if len(req.Command) > MaxTotalArgv {
			s.deny(RiskMedium, fmt.Sprintf("command string of %d bytes exceeds the %d byte limit", len(req.Command), MaxTotalArgv))
			argv = nil
			break
		}
		w, err := cmdline.Split(req.Command)
		if err != nil {
			s.deny(RiskMedium, "command string refused: "+err.Error())
			s.step("split", "deny", err.Error())
		} else {
			argv = w
			s.step("split", "ok", fmt.Sprintf("%d words", len(w)))
		}
	case len(req.Argv) == 0:
		s.deny(RiskLow, "empty command: send argv")
	}
	if len(argv) > MaxArgs {
		s.deny(RiskMedium, fmt.Sprintf("argv has %d arguments; the limit is %d", len(argv), MaxArgs))
	}
	total := 0
	for i, a := range argv {
		total += len(a) + 1
		if len(a) > MaxArgBytes {
			s.deny(RiskMedium, fmt.Sprintf("argument %d is %d bytes; the limit is %d", i, len(a), MaxArgBytes))
			break
		}
		if strings.IndexByte(a, 0) >= 0 {
			s.deny(RiskHigh, fmt.Sprintf("argument %d contains a NUL byte", i))
			break
		}
	}
	if total > MaxTotalArgv {
		s.deny(RiskMedium, fmt.Sprintf("argv totals %d bytes; the limit is %d", total, MaxTotalArgv))
	}
	d.Argv = argv
	if d.Verdict == Deny && (len(argv) == 0 || total > MaxTotalArgv || len(argv) > MaxArgs) {
		s.step("input", "deny", strings.Join(d.Reasons, "; "))
		return finish(s)
	}
	s.step("input", "ok", cmdline.Quote(argv))

	// --- environment additions
	p.checkEnv(req.Env, s)

	// --- working directory
	cwd := ""
	if req.Cwd == "" || !filepath.IsAbs(req.Cwd) || len(req.Cwd) > 4096 || strings.IndexByte(req.Cwd, 0) >= 0 {
		s.deny(RiskMedium, "cwd must be an absolute path")
		s.step("cwd", "deny", req.Cwd)
	} else {
		cwd = ctx.paths.resolve(req.Cwd, 0)
		d.Cwd = cwd
		if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
			s.deny(RiskMedium, "cwd "+cwd+" is not an existing directory")
		}
		in := false
		for _, ws := range ctx.workspaces {
			if within(ws, cwd) {
				in = true
			}
		}
		if len(ctx.workspaces) == 0 {
			s.deny(RiskMedium, "no workspace roots are configured")
		} else if !in {
			s.deny(RiskHigh, "cwd "+cwd+" is outside the workspace roots")
		}
		s.step("cwd", outcome(in), cwd)
	}

	p.decideArgv(argv, cwd, req, ctx, depth, s)
	if depth == 0 {
		p.checkCredentials(req, ctx, s)
	}
	return finish(s)
}

func outcome(ok bool) string {
	if ok {
		return "ok"
	}
	return "deny"
}

func finish(s *state) Decision {
	d := s.d
	if d.Verdict == Deny {
		d.ExecArgv = nil
		d.ExecEnv = nil
	}
	s.step("verdict", string(d.Verdict), "risk "+string(d.Risk))
	return *d
}

var envNameOK = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func envPatternMatch(pat, name string) bool {
	switch {
	case strings.HasPrefix(pat, "*") && strings.HasSuffix(pat, "*") && len(pat) > 1:
		return strings.Contains(strings.ToUpper(name), strings.ToUpper(pat[1:len(pat)-1]))
	case strings.HasPrefix(pat, "*"):
		return strings.HasSuffix(strings.ToUpper(name), strings.ToUpper(pat[1:]))
	case strings.HasSuffix(pat, "*"):
		return strings.HasPrefix(name, pat[:len(pat)-1])
	}
	return pat == name
}

func (p *Policy) checkEnv(env map[string]string, s *state) {
	if len(env) == 0 {
		return
	}
	if len(env) > MaxEnvVars {
		s.deny(RiskMedium, fmt.Sprintf("%d environment variables requested; the limit is %d", len(env), MaxEnvVars))
		return
	}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	accepted := map[string]string{}
	for _, k := range names {
		v := env[k]
		if !envNameOK.MatchString(k) {
			s.deny(RiskHigh, fmt.Sprintf("environment variable name %q is not valid", clip(printable(k))))
			continue
		}
		if len(v) > MaxArgBytes || strings.IndexByte(v, 0) >= 0 {
			s.deny(RiskMedium, fmt.Sprintf("environment variable %s has a value that is too large or contains NUL", k))
			continue
		}
		denied := false
		for _, pat := range p.envDenyList() {
			if envPatternMatch(pat, k) {
				s.deny(RiskHigh, fmt.Sprintf("environment variable %s is a loader, hook or tool-control variable (%s) and is denied", k, pat))
				denied = true
				break
			}
		}
		if denied {
			continue
		}
		ok := false
		for _, pat := range p.envAllow {
			if envPatternMatch(pat, k) {
				ok = true
				break
			}
		}
		if !ok {
			// Not a loader or hook variable the policy names: a person
			// decides (trusted mode passes it).
			s.raise(Ask, RiskMedium, fmt.Sprintf("environment variable %s is not in the policy's allowlist (env.allow): a person decides whether the command gets it", k))
		}
		if why := envValueProblem(k, v); why != "" {
			s.deny(RiskHigh, fmt.Sprintf("environment variable %s=%s is refused: %s", k, clip(printable(v)), why))
			continue
		}
		accepted[k] = v
	}
	s.d.Env = accepted
	s.step("env", fmt.Sprintf("%d/%d accepted", len(accepted), len(env)), strings.Join(names, ","))
}

func (p *Policy) envDenyList() []string { return p.envDeny }

var (
	localeValueRE = regexp.MustCompile(`^[A-Za-z0-9_@.:+=-]*$`)
	tzValueRE     = regexp.MustCompile(`^:?[A-Za-z0-9_+,.<>-][A-Za-z0-9_+,.<>/-]*$`)
)

// envValueProblem checks the values of allowed variables that programs turn
// into file names: a locale or time zone value naming a path would make
// every root program load message catalogs (printf formats) or zone files
// from wherever the caller put them.
func envValueProblem(name, value string) string {
	switch {
	case name == "LANG" || name == "LANGUAGE" || strings.HasPrefix(name, "LC_"):
		if !localeValueRE.MatchString(value) || strings.Contains(value, "..") {
			return "a locale is a name like en_US.UTF-8 (or a colon-separated list of them), never a path"
		}
	case name == "TZ":
		if value != "" && (!tzValueRE.MatchString(value) || strings.Contains(value, "..")) {
			return "a time zone is a name like Europe/Paris or UTC or a POSIX rule, never an absolute or relative path"
		}
	}
	return ""
}

// ---- program identity ------------------------------------------------------

func badProgramChar(s string) (rune, bool) {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' || r == '+' || r == '/') {
			return r, true
		}
	}
	return 0, false
}

// hashKey identifies a file version: a rewrite in place that keeps size and
// mtime (touch -d) still changes ctime.
type hashKey struct {
	path               string
	size, mtime, ctime int64
	ino, dev           uint64
}

var hashCache sync.Map // hashKey -> string

func fileSHA256(path string) (string, error) {
	// Not os.Open: it offers the file to the poller and sets it back to
	// blocking, five system calls more than open, fstat and close, which is
	// all a hit in hashCache needs.
	fd, err := openRead(path)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return "", &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		// A FIFO or a device (a link in the project swapped in after the
		// check) would be read forever.
		syscall.Close(fd)
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	k := hashKey{path: path, size: st.Size, mtime: mtimeOf(&st), ino: uint64(st.Ino), dev: uint64(st.Dev), ctime: ctimeOf(&st)}
	if v, ok := hashCache.Load(k); ok {
		syscall.Close(fd)
		return v.(string), nil
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	hashCache.Store(k, sum)
	return sum, nil
}

// openRead opens path read-only, again when a signal interrupted it. It
// never blocks (a FIFO's open would wait for a writer).
func openRead(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

func isExecFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// resolveProgram finds name in the trusted PATH; returns the candidate
// path and its real path.
func (p *Policy) resolveProgram(name string, ctx *decideCtx) (string, string) {
	for _, dir := range p.spec.TrustedPath {
		rd := ctx.paths.resolve(dir, 0)
		if inAnyWorkspace(rd, ctx) {
			continue
		}
		cand := dir + "/" + name
		if !isExecFile(cand) {
			continue
		}
		real := ctx.paths.resolve(cand, 0)
		if inAnyWorkspace(real, ctx) {
			continue
		}
		return cand, real
	}
	return "", ""
}

// projectCode is a command that runs a workspace file: the file itself
// (program) or a script given to its interpreter.
type projectCode struct {
	file    string // real path, inside a workspace ("" for a module run)
	program bool   // the file is the program (not an interpreter's script)
	why     string
	// module: the interpreter runs a module or its test runner
	// (interpreterProject); reads are the files it names, net whether it
	// reaches the network, entryTool the tool whose entry files it reads.
	module    string
	reads     []string
	net       bool
	entryTool string
}

// workspaceProgram is a program named by path that is an executable regular
// file inside a workspace, or nil.
func workspaceProgram(a0, cwd string, ctx *decideCtx) *projectCode {
	if cwd == "" && !filepath.IsAbs(a0) {
		return nil
	}
	real := ctx.paths.resolvePath(cwd, a0)
	if !inAnyWorkspace(real, ctx) || !isExecFile(real) {
		return nil
	}
	return &projectCode{file: real, program: true, why: "runs project code: " + a0 + " is a program in the workspace (" + real + "); its arguments are not analysed"}
}

// venvInterpreter: argv[0] names, inside a workspace, a symbolic link to an
// interpreter that is the very file the trusted PATH resolves for its name
// (a virtual environment's .venv/bin/python -> /usr/bin/python3.11). It
// returns argv with the interpreter's bare name, to be decided as that
// interpreter, and why; or nil.
func (p *Policy) venvInterpreter(argv []string, cwd string, ctx *decideCtx) ([]string, string) {
	a0 := argv[0]
	if !strings.Contains(a0, "/") || cwd == "" {
		return nil, ""
	}
	link := a0
	if !filepath.IsAbs(link) {
		link = cwd + "/" + link
	}
	link = filepath.Clean(link)
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 || !inAnyWorkspace(ctx.paths.resolve(filepath.Dir(link), 0), ctx) {
		return nil, ""
	}
	real := ctx.paths.resolve(link, 0)
	base := baseName(real)
	if inAnyWorkspace(real, ctx) || escapeClass(base) != "interpreter" {
		return nil, ""
	}
	if _, tr := p.resolveProgram(base, ctx); tr != real {
		return nil, ""
	}
	return append([]string{base}, argv[1:]...), a0 + " is the workspace environment's link to " + real + " (the trusted " + base + "): decided as " + base + ", run by its workspace path"
}

// interpretedScript is `INTERPRETER FILE [ARGS...]` where FILE is a regular
// file inside a workspace and nothing comes before it (no -c, -e, -m or
// other options), or nil.
func interpretedScript(argv []string, cwd string, ctx *decideCtx) *projectCode {
	if len(argv) < 2 || cwd == "" || argv[1] == "" || strings.HasPrefix(argv[1], "-") || strings.HasPrefix(argv[1], "+") {
		return nil
	}
	real := ctx.paths.resolvePath(cwd, argv[1])
	fi, err := os.Stat(real)
	if err != nil || !fi.Mode().IsRegular() || !inAnyWorkspace(real, ctx) {
		return nil
	}
	return &projectCode{file: real, why: "runs project code: " + baseName(argv[0]) + " (" + escapeClass(baseName(argv[0])) + ") runs the workspace file " + argv[1] + " (" + real + "); its arguments are not analysed"}
}

func (p *Policy) pinned(name, path string) bool {
	for _, r := range p.byProg[name] {
		if r.Path != "" && r.Path == path {
			return true
		}
	}
	return false
}

// ---- the command itself ------------------------------------------------------

// command is one command on its way through the stages of a decision.
type command struct {
	p     *Policy
	argv  []string
	a0    string
	base  string // program base name
	cwd   string
	req   Request
	ctx   *decideCtx
	depth int
	s     *state
	d     *Decision

	tool    *toolSpec    // the registry's spec for base, or nil
	project *projectCode // the command runs a workspace file
	exact   *rule        // an exact rule names this argv
	class   string       // escape class of base

	resolved, real string // the program as named and its real path
	pc             *parsed
	entries        []string // project entry files
	writes, reads  []string // checked paths
	sys, proj      []*rule  // matched rules per layer

	askedWrite, write, unknownRO, confined bool
	// fetchFree: a package fetch held by the sandbox and the registries
	// allow-list (fetch.go).
	fetchFree bool
	// netMode: the network the execution gets (network.go).
	netMode netmode.Mode
	// plainFree: a plain write the sandbox confines to the workspace runs
	// without approval (sandboxed_workspace_writes: allow); plainWhy is
	// the step's detail either way.
	plainFree bool
	plainWhy  string
	// repl: an interpreter started without a script on a terminal.
	repl bool
	// unknownArgs: why the tool's grammar could not read the arguments (an
	// option or subcommand it does not know): the command is unknown code.
	unknownArgs string
	// info: the arguments only ask for the program's version or help.
	info bool
	// wrap: a transparent wrapper (timeout, env, ...) and the command it
	// runs, which is decided as itself.
	wrap *wrapped
}

// decideArgv decides the command itself in stages, each named after the
// explain step it reports; a stage returns false when the decision is made.
// The exec stage reports no step: its result is the decision's exec_argv
// and exec_env.
func (p *Policy) decideArgv(argv []string, cwd string, req Request, ctx *decideCtx, depth int, s *state) {
	if sub, why, ifMissing := builtinForm(argv); sub != nil {
		if cand, _ := p.resolveProgram(baseName(argv[0]), ctx); !ifMissing || cand == "" && !strings.Contains(argv[0], "/") {
			// A shell builtin or keyword: what it asks is decided (and
			// runs) as the program that answers it.
			s.raise(Allow, RiskLow, why)
			s.step("builtin", "substituted", cmdline.Quote(sub))
			argv = sub
		}
	}
	venv := ""
	if sub, why := p.venvInterpreter(argv, cwd, ctx); sub != nil {
		// The workspace's own environment's interpreter (.venv/bin/python):
		// decided as the interpreter it links to, run by the workspace
		// path (which makes the environment's packages the ones used).
		s.raise(Allow, RiskLow, why)
		s.step("program", "environment interpreter", why)
		venv, argv = argv[0], sub
	}
	defer func() {
		if venv != "" && len(s.d.ExecArgv) > 0 {
			s.d.ExecArgv[0] = venv
		}
	}()
	c := command{p: p, argv: argv, a0: argv[0], cwd: cwd, req: req, ctx: ctx, depth: depth, s: s, d: s.d}
	_ = c.program() && // "program"
		c.escape() && // "escape"
		c.identity() && // "identity"
		c.wrapper() && // "wrapper"
		c.grammar() && // "grammar"
		c.paths() && // "paths"
		c.rules() && // "rules"
		c.effects() && // "effects"
		c.projectFiles() && // "project-files"
		c.sandbox() && // "sandbox"
		c.terminal() && // "terminal"
		c.modeAdjust() && // "mode-adjust"
		c.execPlan() // "exec"
}

// program: the program name, and whether the command runs project code.
func (c *command) program() bool {
	a0, s := c.a0, c.s
	if r, bad := badProgramChar(a0); bad || a0 == "" || strings.HasPrefix(a0, "-") {
		what := "is empty"
		if bad {
			what = fmt.Sprintf("contains the disallowed character %U (quotes, globs, spaces, control, zero-width and non-ASCII look-alikes are refused)", r)
		} else if a0 != "" {
			what = "starts with '-'"
		}
		s.deny(RiskCritical, "program name "+cmdline.Quote([]string{a0})+" "+what)
		s.step("program", "deny", "bad program name")
		return false
	}
	c.base = baseName(a0)
	c.tool = toolNamed(c.base)
	// Project code: a program inside a workspace named by its path
	// (./scripts/x.sh, or its absolute path), or a script of the workspace
	// run by its interpreter (python3 x.py). No rule knows what it does, so
	// it asks (confirm mode) instead of being refused.
	if strings.Contains(a0, "/") {
		c.project = workspaceProgram(a0, c.cwd, c.ctx)
	} else if runsScripts(c.base) {
		c.project = interpretedScript(c.argv, c.cwd, c.ctx)
	}
	if strings.Contains(a0, "/") && !filepath.IsAbs(a0) && c.project == nil {
		s.deny(RiskCritical, "program path "+a0+" is relative; send a bare program name resolved by the trusted PATH")
		s.step("program", "deny", "relative path")
		c.p.inner(append([]string{c.base}, c.argv[1:]...), c.cwd, c.req, c.ctx, c.depth, s)
		return false
	}
	if c.base == "." || c.base == ".." || c.base == "" {
		s.deny(RiskCritical, "program name "+a0+" is not a file name")
		return false
	}
	// exact rules name an escape form precisely
	for _, r := range c.p.byProg[c.base] {
		if len(r.Exact) > 0 && len(r.Exact) == len(c.argv) && equalStrings(r.Exact[1:], c.argv[1:]) {
			c.exact = r
		}
	}
	return true
}

// escape: shells, interpreters, wrappers and privilege tools.
func (c *command) escape() bool {
	c.class = escapeClass(c.base)
	if c.req.TTY != nil && c.class == "interpreter" && c.exact == nil && c.project == nil && replArgs(c.argv[1:]) {
		c.repl = true
		c.s.step("escape", "repl", c.base+" without a script on a terminal: what is typed is code")
		return true
	}
	if c.class == "interpreter" && c.exact == nil && c.project == nil && !c.repl {
		if interpreterInfo(c.base, c.argv) {
			c.info = true
			c.s.step("escape", "version", c.base+" "+c.argv[1]+" prints the interpreter's version or help; no code runs")
			return true
		}
		if pc := interpreterProject(c.base, c.argv); pc != nil {
			c.project = pc
			c.s.step("escape", "project code", pc.why)
			return true
		}
	}
	if c.class == "program-running wrapper" && c.exact == nil && c.project == nil {
		if w := unwrapCommand(c.base, c.argv); w != nil {
			c.wrap = w
			c.s.step("escape", "wrapper", c.base+" runs "+cmdline.Quote(w.inner)+", which is decided as itself")
			return true
		}
	}
	if c.class != "" && c.exact == nil && c.project == nil {
		if inner, isEsc, why := escapeInner(c.base, c.argv); isEsc {
			c.s.deny(RiskCritical, why)
			c.s.step("escape", "deny", c.class)
			if inner != nil {
				c.p.inner(inner, c.cwd, c.req, c.ctx, c.depth, c.s)
			}
			return false
		}
	}
	c.s.step("escape", "ok", "")
	return true
}

// identity: the file that runs, found in the trusted PATH, and its hash.
func (c *command) identity() bool {
	p, s, a0, base, project := c.p, c.s, c.a0, c.base, c.project
	var resolved, real string
	if project != nil && project.program {
		resolved, real = project.file, project.file
	} else if filepath.IsAbs(a0) {
		clean := filepath.Clean(a0)
		cr := c.ctx.paths.resolve(clean, 0)
		if p.pinned(base, clean) {
			resolved, real = clean, cr
			if !isExecFile(cr) {
				s.deny(RiskHigh, "pinned program "+clean+" is not an executable file")
				return false
			}
		} else {
			_, tr := p.resolveProgram(base, c.ctx)
			if tr == "" || tr != cr {
				s.deny(RiskCritical, "absolute program path "+clean+" is not the file the trusted PATH resolves for "+base)
				s.step("identity", "deny", clean)
				return false
			}
			resolved, real = clean, cr
		}
	} else {
		resolved, real = p.resolveProgram(base, c.ctx)
		if resolved == "" {
			s.deny(RiskHigh, "program "+base+" was not found in the trusted PATH ("+strings.Join(p.spec.TrustedPath, ":")+")")
			s.step("identity", "deny", base)
			return false
		}
	}
	for _, ws := range c.ctx.workspaces {
		if within(ws, real) && (project == nil || !project.program) {
			s.deny(RiskCritical, "program "+real+" is inside a workspace")
			return false
		}
	}
	if rc := escapeClass(baseName(real)); rc != "" && c.class == "" && project == nil {
		s.deny(RiskCritical, fmt.Sprintf("program %s resolves to %s, a %s", base, real, rc))
		return false
	}
	sum, err := fileSHA256(real)
	if err != nil {
		s.deny(RiskHigh, "cannot hash program "+real+": "+err.Error())
		return false
	}
	c.resolved, c.real = resolved, real
	c.d.ResolvedPath, c.d.BinarySHA256 = real, sum
	s.step("identity", "ok", real+" sha256:"+sum)
	return true
}

// wrapper: a wrapper that runs one command and changes nothing the policy
// looks at is decided as that command: its verdict, reasons, effects,
// sandbox and project files; the wrapper runs it by the path the trusted
// PATH resolves, with the arguments and environment it is forced to run
// with.
func (c *command) wrapper() bool {
	w := c.wrap
	if w == nil {
		return true
	}
	s, d := c.s, c.d
	if c.depth+1 >= maxDepth {
		s.deny(RiskHigh, c.base+": wrappers nested too deeply; send the command itself")
		return false
	}
	env := map[string]string{}
	for k, v := range c.req.Env {
		env[k] = v
	}
	for k, v := range w.env {
		env[k] = v // checked against the env policy as the command's own
	}
	sub := Request{Argv: w.inner, Cwd: c.req.Cwd, Env: env, Mode: c.req.Mode, Timeout: c.req.Timeout, Sandbox: c.req.Sandbox, TTY: c.req.TTY, Network: c.req.Network}
	if w.chdir != "" {
		sub.Cwd = resolvePath(c.cwd, w.chdir)
	}
	in := c.p.decide(sub, c.ctx, c.depth+1)
	inner := clip(cmdline.Quote(w.inner))
	s.raise(in.Verdict, in.Risk, c.base+" runs "+inner+", decided as that command")
	for _, r := range in.Reasons {
		s.raise(in.Verdict, in.Risk, r)
	}
	for _, st := range in.Steps {
		s.step("inner "+st.Name, st.Outcome, st.Detail)
	}
	d.Rules = append(d.Rules, in.Rules...)
	d.Network, d.RunsProjectCode, d.ReadOnly, d.RunAs = in.Network, in.RunsProjectCode, in.ReadOnly, in.RunAs
	d.Writes, d.ProjectFiles, d.Sandbox = in.Writes, in.ProjectFiles, in.Sandbox
	d.Sandbox.Exec = append(program.Exec(c.real, c.p.spec.TrustedPath...), in.Sandbox.Exec...)
	for _, v := range w.reads {
		c.wrapperPath(v, false)
	}
	for _, v := range w.writes {
		c.wrapperPath(v, true)
	}
	if w.stdinArgs && d.Verdict != Deny && d.Mode != ModeTrusted && (!c.ctx.sandbox || !in.ReadOnly) {
		s.raise(Ask, RiskMedium, c.base+" adds arguments it reads from its input, which the policy cannot check (a fully enforced sandbox confines what a read-only command reads; a command that writes asks)")
	}
	if d.Verdict == Deny || len(in.ExecArgv) == 0 {
		return false
	}
	run := slices.Clone(in.ExecArgv)
	if !strings.Contains(run[0], "/") {
		if cand, _ := c.p.resolveProgram(baseName(run[0]), c.ctx); cand != "" {
			run[0] = cand
		}
	}
	d.ExecArgv = slices.Clone(w.prefix)
	d.ExecArgv[0] = c.a0
	if w.envLast {
		for _, k := range sortedKeys(in.ExecEnv) {
			d.ExecArgv = append(d.ExecArgv, k+"="+in.ExecEnv[k])
		}
	}
	d.ExecArgv = append(d.ExecArgv, run...)
	d.ExecEnv = in.ExecEnv
	return false
}

// wrapperPath checks a file a wrapper itself reads or writes.
func (c *command) wrapperPath(v string, write bool) {
	real := c.ctx.paths.resolvePath(c.cwd, v)
	pv := c.p.checkPath(real, write, false, c.ctx)
	c.s.raise(pv.verdict, pv.risk, pv.reason)
	if write {
		c.d.Writes = append(c.d.Writes, real)
		c.d.ReadOnly = false
		if inAnyWorkspace(real, c.ctx) {
			if c.d.Sandbox.Profile == SandboxReadOnly {
				c.d.Sandbox.Profile = SandboxWorkspaceWrite
			}
		} else if pv.verdict != Deny {
			c.d.Sandbox.Write = append(c.d.Sandbox.Write, real)
		}
		if c.d.Mode == ModeInspect {
			c.s.deny(RiskMedium, "inspect mode runs only read-only commands ("+c.base+" writes "+real+")")
		}
		if c.d.Mode == ModeConfirm && c.d.Verdict == Allow {
			c.s.raise(Ask, RiskMedium, "confirm mode: approval needed because "+c.base+" writes "+real)
		}
	} else if !inAnyWorkspace(real, c.ctx) && !c.p.systemRead(real) && pv.verdict != Deny {
		c.d.Sandbox.Read = append(c.d.Sandbox.Read, real)
	}
}

// grammar: the arguments read with the tool's grammar.
func (c *command) grammar() bool {
	s, base := c.s, c.base
	switch {
	case c.info:
		c.pc = &parsed{tool: base}
		s.step("grammar", "version", "no code runs")
	case c.project != nil:
		c.pc = &parsed{tool: base, unparsed: true, code: true, net: c.project.net}
		if c.project.file != "" {
			c.pc.paths = append(c.pc.paths, operand{value: c.project.file, kind: KPathRead})
		}
		for _, r := range c.project.reads {
			c.pc.paths = append(c.pc.paths, operand{value: r, kind: KPathRead})
		}
		s.step("grammar", "project code", c.project.why)
	case c.exact != nil:
		c.pc = &parsed{tool: base, unparsed: true}
		s.step("grammar", "exact", "rule "+c.exact.ID+" names this argv exactly")
	case c.repl:
		c.pc = &parsed{tool: base, unparsed: true, code: true}
		s.step("grammar", "repl", "a REPL's input is not analysed")
	default:
		pc, known, err := parseCommand(append([]string{base}, c.argv[1:]...))
		if err != nil {
			// An option or subcommand the grammar does not know is not a
			// danger in itself: the command is unknown code, like a program
			// no rule knows (read-only sandbox when it is enforced, else
			// ask). What the grammar refused before it stopped still holds.
			c.unknownArgs = base + ": " + err.Error()
			for _, f := range pc.findings {
				s.raise(f.verdict, f.risk, f.reason)
			}
			c.pc = &parsed{tool: base, unparsed: true}
			// Arguments that name files are still checked as reads: a
			// bogus option must not turn a denied read (a secret, termd's
			// own files) into unknown code.
			for _, a := range c.argv[1:] {
				if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "--") {
					a = v
				}
				if a != "" && !strings.HasPrefix(a, "-") && (strings.Contains(a, "/") || exists(c.cwd, a)) {
					c.pc.paths = append(c.pc.paths, operand{value: a, kind: KPathRead})
				}
			}
			s.step("grammar", "unknown", err.Error()+": the arguments are not analysed; the command runs as unknown code")
			return true
		}
		c.pc = pc
		if !known {
			s.step("grammar", "none", "no grammar for "+base+"; arguments are not analysed")
		} else {
			s.step("grammar", "ok", pc.cmdName())
		}
		if pc.write || pc.code {
			// Directory options of a command that writes or builds: the
			// command works (and writes) there.
			for i := range pc.paths {
				if pc.paths[i].kind == KPathRead && pc.paths[i].dirOpt {
					pc.paths[i].kind = KPathWrite
				}
			}
		}
		for _, f := range pc.findings {
			s.raise(f.verdict, f.risk, f.reason)
		}
		if c.req.TTY == nil {
			// Interactive options (git add -p) need the terminal they ask for.
			for _, f := range pc.ttyOnly {
				s.raise(f.verdict, f.risk, f.reason)
			}
		}
		for _, in := range pc.inner {
			c.p.inner(in, c.cwd, c.req, c.ctx, c.depth, s)
		}
	}
	return true
}

// hook runs one tool hook on the command and applies what it reported.
func (c *command) hook(h func(*toolCall)) {
	tc := &toolCall{pc: c.pc, cwd: c.cwd, ctx: c.ctx, entries: c.entries, execArgv: c.d.ExecArgv, execEnv: c.d.ExecEnv}
	h(tc)
	for _, f := range tc.denials {
		c.s.deny(f.risk, f.reason)
	}
	c.d.ExecArgv, c.d.ExecEnv = tc.execArgv, tc.execEnv
}

// hookReads runs a hook that names files the command reads.
func (c *command) hookReads(h func(*toolCall) []string) {
	for _, f := range h(&toolCall{pc: c.pc, cwd: c.cwd, ctx: c.ctx}) {
		c.pc.paths = append(c.pc.paths, operand{value: f, kind: KPathRead})
	}
}

// paths: every path the command reads or writes, resolved and checked.
func (c *command) paths() bool {
	pc, cwd, ctx, s, t := c.pc, c.cwd, c.ctx, c.s, c.tool
	if t != nil && t.fixedReads != nil && cwd != "" {
		c.hookReads(t.fixedReads)
	}
	// The entry files are found once: read-checked here, scanned (.npmrc)
	// and bound to the request below.
	c.entries = projectEntryPaths(t, pc, cwd, ctx)
	if c.project != nil {
		c.entries = nil
		if c.project.file != "" {
			c.entries = []string{c.project.file}
		}
		if et := c.project.entryTool; et != "" {
			c.entries = projectEntryPaths(toolNamed(et), &parsed{tool: et}, cwd, ctx)
		}
	}
	for _, f := range c.entries {
		// Tools read these by fixed names: a link to a root-only file
		// would be printed in a parse error.
		if _, err := os.Lstat(f); err == nil {
			pc.paths = append(pc.paths, operand{value: f, kind: KPathRead})
		}
	}
	for _, f := range envReads(s.d.Env) {
		pc.paths = append(pc.paths, operand{value: f, kind: KPathRead})
	}
	if t != nil && t.derivedReads != nil && cwd != "" {
		c.hookReads(t.derivedReads)
	}
	c.writes, c.reads = c.p.checkPaths(pc, cwd, ctx, s)
	if t != nil && t.check != nil {
		c.hook(t.check)
	}
	return true
}

// rules: the policy's rules for the program.
func (c *command) rules() bool {
	p, s, d, pc, project, exact := c.p, c.s, c.d, c.pc, c.project, c.exact
	for _, r := range p.byProg[c.base] {
		if project != nil && project.program {
			break // a workspace program is not the tool its name says
		}
		if r.Path != "" && r.Path != filepath.Clean(c.a0) && r.Path != c.resolved && c.ctx.paths.resolve(r.Path, 0) != c.real {
			continue
		}
		if c.unknownArgs != "" && r.verdict == Allow {
			continue // an allow rule knows the commands its grammar reads, not this one
		}
		var ok bool
		if exact != nil {
			ok = r == exact
		} else if len(r.Exact) == 0 {
			ok, _ = r.matchParsed(pc)
		}
		if !ok {
			continue
		}
		if r.layer == 0 {
			c.sys = append(c.sys, r)
		} else {
			c.proj = append(c.proj, r)
		}
	}
	// Project code and unknown programs are not refused: they are project
	// code (high risk), which the mode step below turns into an approval in
	// confirm mode, or lets run inside a fully enforced sandbox.
	switch {
	case c.repl:
		s.raise(Allow, RiskHigh, "")
		s.step("rules", "repl", c.base)
	case project != nil:
		s.raise(Allow, RiskHigh, project.why)
		s.step("rules", "project code", project.file+project.module)
	case c.info:
		s.raise(Allow, RiskLow, c.base+" "+c.argv[1]+" prints the interpreter's version or help (no code runs)")
		s.step("rules", "version", c.base)
	case len(c.sys) == 0 && c.unknownArgs != "":
		// A known program with arguments its grammar does not read: as
		// unknown as a program no rule knows.
		pc.code = true
		s.raise(Allow, RiskHigh, c.unknownArgs+": termd's grammar does not know it, so the command runs as unknown code, like a program no rule knows (its arguments are not analysed)")
		s.step("rules", "unknown arguments", c.unknownArgs)
	case len(c.sys) == 0 && pc.unparsed && exact == nil && c.class == "":
		// A program no rule and no grammar knows: unknown code, like a
		// project's own script. Its arguments are not analysed.
		pc.code = true
		s.raise(Allow, RiskHigh, "no policy rule knows "+c.base+": it runs as unknown code, like project code (its arguments are not analysed)")
		s.step("rules", "unknown program", c.base)
	case len(c.sys) == 0 && pc.infoOnly():
		s.raise(Allow, RiskLow, pc.tool+" only prints its version or help")
		s.step("rules", "version or help", pc.tool)
	case len(c.sys) == 0 && exact == nil && c.class == "":
		// A program the grammar reads but no rule covers: the policy does
		// not know this use of it, which is not a danger in itself.
		pc.unparsed, pc.code = true, true
		s.raise(Allow, RiskHigh, "no policy rule covers "+pc.cmdName()+": it runs as unknown code, like a program no rule knows")
		s.step("rules", "no matching rule", pc.cmdName())
	case len(c.sys) == 0:
		s.deny(RiskHigh, "no policy rule allows "+pc.cmdName())
		s.step("rules", "deny", "no matching rule")
	}
	alreadyDenied := d.Verdict == Deny
	for _, r := range append(c.sys, c.proj...) {
		d.Rules = append(d.Rules, r.ID)
		if alreadyDenied && r.verdict != Deny {
			continue // an allow rule's reason would only confuse a denial
		}
		s.raise(r.verdict, r.risk, r.Reason+" (rule "+r.ID+")")
		if r.RunAs != "" {
			d.RunAs = r.RunAs
		}
	}
	if len(c.sys)+len(c.proj) > 0 {
		s.step("rules", "matched", strings.Join(d.Rules, ","))
	}
	return true
}

// effects: writes, network and project code, and what they cost.
func (c *command) effects() bool {
	p, s, d, pc, cwd := c.p, c.s, c.d, c.pc, c.cwd
	c.askedWrite = c.req.Sandbox == SandboxWorkspaceWrite
	if c.askedWrite {
		// Writes the grammar did not see: for a program without a grammar
		// that is running project code.
		pc.write = true
		if pc.unparsed {
			pc.code = true
		}
	}
	d.Writes = c.writes
	c.netMode = networkFor(fetchNetwork(c.req.Network, pc, c.ctx), pc, c.ctx.sandbox, s)
	d.Network = pc.net
	d.RunsProjectCode = pc.code
	c.write = pc.write || len(c.writes) > 0 || pc.unparsed
	d.ReadOnly = !c.write && !pc.net && !pc.code && !pc.unparsed
	if pc.code {
		s.raise(Allow, RiskHigh, "")
	}
	if c.write || pc.net {
		s.raise(Allow, RiskMedium, "")
	}
	if pc.write && cwd != "" {
		if why := p.protectedWrite(cwd, c.ctx); why != "" {
			s.deny(RiskCritical, "command writes in "+cwd+", which is protected: "+why)
		}
	}
	if pc.net && !p.NetworkAllowed() {
		s.deny(RiskMedium, pc.cmdName()+" uses the network, which the policy denies")
	}
	s.step("effects", fmt.Sprintf("write=%t network=%t project_code=%t", c.write, pc.net, pc.code), strings.Join(c.writes, ","))
	return true
}

// project-files: the entry files of project code, bound to the request.
func (c *command) projectFiles() bool {
	s, pc := c.s, c.pc
	if pf := projectFiles(pc, c.entries); len(pf) > 0 {
		c.d.ProjectFiles = pf
		var shown []string
		for _, k := range sortedKeys(pf) {
			shown = append(shown, k+"="+pf[k])
			// A digest that does not follow the content (a FIFO, a huge
			// file) would let the file change after approval unseen.
			if v := pf[k]; v != "absent" && !strings.HasPrefix(v, "sha256:") {
				s.deny(RiskHigh, pc.tool+" would run "+k+", which cannot be bound to an approval ("+v+"); make it a regular file under 16 MiB")
			}
		}
		s.step("project-files", fmt.Sprintf("%d bound to the request hash", len(pf)), strings.Join(shown, ", "))
	}
	return true
}

// sandbox: the profile the kernel holds the execution to.
func (c *command) sandbox() bool {
	d, pc, ctx := c.d, c.pc, c.ctx
	d.Sandbox = c.p.sandboxFor(d, c.base, c.reads, ctx)
	// A program the policy has no grammar for runs read-only unless the
	// caller asks for more; a caller may always narrow a plan. Shells,
	// interpreters, wrappers and privilege tools (allowed only by exact
	// rules) keep their rules: what they run is not known.
	// A project's own program or script (./scripts/x.sh, python3 x.py) is
	// project code like make: workspace-write.
	unknown := pc.unparsed && escapeClass(c.base) == "" && c.project == nil
	if (unknown && !c.askedWrite) || c.req.Sandbox == SandboxReadOnly {
		d.Sandbox.Profile = SandboxReadOnly
	}
	c.unknownRO = ctx.sandbox && unknown && !c.askedWrite && !pc.net
	// The kernel holds project code to the workspace when the sandbox is
	// fully enforced: offline project code that writes only there needs no
	// approval (see docs/SANDBOX.md, "Approval economy").
	d.Sandbox.NetworkMode = string(c.netMode)
	d.Sandbox.Network = c.netMode == netmode.Host
	// A package fetch through the registries allow-list is held like
	// offline project code (fetch.go).
	c.fetchFree = c.fetchContained()
	c.confined = ctx.sandbox && pc.code && (!pc.net || c.fetchFree) && len(d.Sandbox.Write) == 0 && len(d.Sandbox.Read) == 0
	c.s.step("sandbox", d.Sandbox.Profile, fmt.Sprintf("network=%s enforced=%t", d.Sandbox.NetworkMode, ctx.sandbox))
	return true
}

// sandboxedWrite decides whether a write is a plain write inside the
// workspace that the enforced sandbox confines completely (see the policy
// setting sandboxed_workspace_writes): it reports the step outcome (allow,
// ask, or "" when the question does not arise) and its detail.
func (c *command) sandboxedWrite() (string, string) {
	d, pc, ctx := c.d, c.pc, c.ctx
	if d.Mode != ModeConfirm || !c.write || pc.code || pc.unparsed || d.Verdict != Allow {
		return "", "" // not a write, or project code, or already asking or denied for its own reasons
	}
	if !ctx.sandbox {
		return "ask", "no fully enforced sandbox (sandbox off, unavailable or partial): writes ask"
	}
	ws := ""
	for _, w := range ctx.workspaces {
		if within(w, c.cwd) {
			ws = w
			break
		}
	}
	var why []string
	switch {
	case pc.net:
		why = append(why, "it uses the network")
	case d.Sandbox.Profile != SandboxWorkspaceWrite || len(d.Sandbox.Write) > 0 || len(d.Sandbox.Read) > 0 || ws == "":
		why = append(why, "its sandbox is not the plain workspace-write profile")
	case d.RunAs != "":
		why = append(why, "it runs as "+d.RunAs)
	case riskRank(d.Risk) > riskRank(RiskMedium):
		why = append(why, "its risk is "+string(d.Risk))
	case pc.spec == nil || !pc.spec.plainWrite:
		why = append(why, pc.cmdName()+" is not a plain edit (it may remove, discard or write files the policy did not check)")
	case pc.recursive:
		why = append(why, "it writes recursively (files the policy did not check)")
	}
	why = append(why, pc.notPlain...)
	for _, w := range c.writes {
		if entryFileName(w) {
			why = append(why, w+" is an entry file that later commands run or build from")
		}
	}
	if len(why) > 0 {
		return "ask", "not a plain workspace write: " + strings.Join(why, "; ")
	}
	by := ctx.sandboxBy
	if by == "" {
		by = "the kernel sandbox"
	}
	if c.p.SandboxedWorkspaceWrites() == SandboxedWritesAsk {
		return "ask", "writes confined to " + ws + " by " + by + ", but the policy setting sandboxed_workspace_writes is ask"
	}
	return "allow", "writes confined to " + ws + " by " + by
}

// mode-adjust: what the mode makes of the verdict.
func (c *command) modeAdjust() bool {
	s, d, pc := c.s, c.d, c.pc
	switch d.Mode {
	case ModeInspect:
		if !d.ReadOnly {
			s.deny(d.Risk, "inspect mode runs only read-only commands")
		}
	case ModeConfirm:
		var why []string
		free := c.confined || c.unknownRO || c.fetchFree // the kernel holds it; see the sandbox stage
		if outcome, detail := c.sandboxedWrite(); outcome != "" {
			s.step("sandboxed-workspace-write", outcome, detail)
			c.plainFree = outcome == "allow"
			c.plainWhy = detail
		}
		if c.write && !free && !c.plainFree {
			why = append(why, "writes")
		}
		if pc.code && !free {
			why = append(why, "runs project code")
		}
		if pc.net && !c.fetchFree {
			why = append(why, "uses the network")
		}
		switch {
		case len(why) > 0 || d.Verdict != Allow:
		case c.unknownRO:
			s.d.Reasons = append(s.d.Reasons, "confirm mode: the policy does not know this command of "+pc.tool+"; it runs without approval inside the read-only sandbox (it can read what cat could and print it; plan with sandbox workspace-write to let it write in the workspace, as project code)")
		case c.fetchFree:
			s.d.Reasons = append(s.d.Reasons, "confirm mode: a package fetch runs without approval inside the "+d.Sandbox.Profile+" sandbox with network "+string(c.netMode)+" (it reaches only the package registries, through termd's proxy; install scripts run contained: writes only in the workspace and its caches, enforced by the kernel)")
		case c.confined:
			s.d.Reasons = append(s.d.Reasons, "confirm mode: project code runs without approval inside the "+d.Sandbox.Profile+" sandbox (no network beyond its workspace loopback, writes only in the workspace, enforced by the kernel)")
		case c.plainFree:
			s.d.Reasons = append(s.d.Reasons, "confirm mode: sandboxed-workspace-write: allowed without approval, "+c.plainWhy+" (policy setting sandboxed_workspace_writes: allow)")
		}
		if len(why) > 0 && d.Verdict == Allow {
			reason := "confirm mode: approval needed because the command " + strings.Join(why, ", ")
			if c.plainWhy != "" && contains(why, "writes") {
				reason += " (" + c.plainWhy + ")"
			}
			s.raise(Ask, d.Risk, reason)
		}
	case ModeTrusted:
		if d.Verdict == Ask {
			d.Verdict = Allow
			s.d.Reasons = append(s.d.Reasons, "trusted mode: no approval needed")
		}
	}
	s.step("mode-adjust", string(d.Verdict), string(d.Mode))
	return true
}

// exec: the argv and environment the program is forced to run with.
func (c *command) execPlan() bool {
	p, d, base := c.p, c.d, c.base
	ps := p.programs[base]
	if c.project != nil && c.project.program {
		ps = programSpec{} // mandatory arguments belong to the tool of that name, not to this file
	}
	d.ExecArgv = append([]string{c.a0}, ps.ExecArgs...)
	d.ExecArgv = append(d.ExecArgv, c.argv[1:]...)
	if len(ps.ExecEnv) > 0 {
		d.ExecEnv = map[string]string{}
		for k, v := range ps.ExecEnv {
			d.ExecEnv[k] = v
		}
	}
	if t := c.tool; t != nil {
		for _, r := range t.runs {
			// A tool that runs another (go's VCS stamping runs git) passes
			// it the same mandatory settings as a command of its own,
			// through the environment, which outranks a repository's config.
			if d.ExecEnv == nil {
				d.ExecEnv = map[string]string{}
			}
			for k, v := range p.childEnv[r] {
				d.ExecEnv[k] = v
			}
		}
		if t.forced != nil {
			c.hook(t.forced)
		}
	}
	return true
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// inner analyses a wrapped command so its reasons appear in the decision.
func (p *Policy) inner(argv []string, cwd string, req Request, ctx *decideCtx, depth int, s *state) {
	if len(argv) == 0 || depth >= maxDepth {
		return
	}
	sub := Request{Argv: argv, Cwd: req.Cwd, Mode: req.Mode, Timeout: req.Timeout}
	id := p.decide(sub, ctx, depth+1)
	if id.Verdict == Allow {
		s.step("inner", "allow", cmdline.Quote(argv))
		return
	}
	for _, r := range id.Reasons {
		s.raise(Deny, "", "inner command "+clip(cmdline.Quote(argv))+": "+r)
	}
	s.step("inner", string(id.Verdict), cmdline.Quote(argv))
}

func (p *Policy) checkPaths(pc *parsed, cwd string, ctx *decideCtx, s *state) (writes, reads []string) {
	if cwd == "" {
		return nil, nil
	}
	all := append(append([]operand(nil), pc.operands...), pc.paths...)
	// A tool that changes directory for each -C in turn before anything
	// else (git): its operands and path options are relative to where it
	// ends up.
	base := cwd
	t := toolNamed(pc.tool)
	if t != nil && t.chdir != "" {
		base = t.workDir(pc, cwd)
		var rest []operand
		chdir, c := operand{value: base, kind: KPathRead}, t.grammar.optIndex[t.chdir]
		for _, op := range all {
			if op.from == c {
				if op.kind == KPathWrite {
					chdir.kind = KPathWrite
				}
				continue
			}
			rest = append(rest, op)
		}
		all = rest
		if base != cwd {
			all = append(all, chdir)
		}
	}
	var check func(v string, write bool) string
	check = func(v string, write bool) string {
		real := ctx.paths.resolvePath(base, v)
		pv := p.checkPath(real, write, t != nil && t.namesOnly && !pc.recursive, ctx)
		if pv.reason != "" || pv.verdict != Allow {
			s.raise(pv.verdict, pv.risk, pv.reason)
		} else {
			s.raise(Allow, pv.risk, "")
		}
		if !write && pc.recursive && pv.verdict != Deny && recursiveOutside(real) {
			if !inAnyWorkspace(real, ctx) {
				s.raise(Ask, RiskHigh, pc.cmdName()+" reads "+real+" recursively: files below it (keys, credentials readable only by root) are not checked")
			}
		}
		if write && !contains(writes, real) {
			writes = append(writes, real)
		}
		if !write && pv.verdict != Deny && !contains(reads, real) {
			reads = append(reads, real)
		}
		if write && isSetID(real) && (t == nil || !t.writesNoContent) {
			// Writing a setuid/setgid file as root keeps its bits: new
			// content would run with the owner's privileges.
			s.deny(RiskCritical, "write to "+real+" is denied: it is setuid/setgid, and a write by root keeps those bits (remove them first: chmod u-s,g-s)")
		}
		if write && pc.backupSuffix != "" && !strings.HasSuffix(v, pc.backupSuffix) {
			// The replaced destination is renamed next to it.
			check(v+pc.backupSuffix, true)
		}
		if write && t != nil && t.removes {
			for _, ws := range ctx.workspaces {
				if within(real, ws) {
					s.deny(RiskCritical, pc.tool+": "+real+" is a workspace root (or contains one); removing the workspace itself is denied")
				}
			}
		}
		return real
	}
	n := 0
	var sources []string
	for i, op := range all {
		if op.value == "" || op.value == "-" && op.kind != KPathWrite {
			continue
		}
		switch op.kind {
		case KPathRead, KPathWrite:
			n++
			real := check(op.value, op.kind == KPathWrite)
			if i < len(pc.operands)-1 {
				sources = append(sources, op.value)
			}
			// cp/mv/ln into an existing directory write DIR/basename(src)
			if pc.copyInto && op.kind == KPathWrite && i == len(pc.operands)-1 {
				if fi, err := os.Stat(real); err == nil && fi.IsDir() {
					for _, src := range sources {
						// Not filepath.Join: it would drop "L/.." before the
						// kernel follows the link L.
						check(real+"/"+pc.intoName(src), true)
					}
				}
			}
		}
	}
	s.step("paths", fmt.Sprintf("%d checked", n), strings.Join(writes, ","))
	return writes, reads
}

// exists reports whether name, relative to dir, names an existing file.
func exists(dir, name string) bool {
	if dir == "" {
		return false
	}
	_, err := os.Lstat(resolvePath(dir, name))
	return err == nil
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func inAnyWorkspace(real string, ctx *decideCtx) bool {
	for _, ws := range ctx.workspaces {
		if within(ws, real) {
			return true
		}
	}
	return false
}

// isSetID reports whether path is a regular file with setuid or setgid.
func isSetID(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0
}

// matchParsed checks the rule's subcommand and option constraints.
func (r *rule) matchParsed(p *parsed) (bool, string) {
	if r.subs != nil {
		if p.unparsed || len(p.subs) == 0 || !r.subs[p.subs[0]] {
			return false, "subcommand not listed"
		}
	}
	if len(r.Options) > 0 && !p.has(r.Options...) {
		return false, "none of the options " + strings.Join(r.Options, ",") + " present"
	}
	return true, ""
}

// matches is used for the rule's own examples: program, grammar, hidden
// execution findings and constraints (no file system access).
func (r *rule) matches(argv []string) (bool, string) {
	if baseName(argv[0]) != r.Program {
		return false, "different program"
	}
	if len(r.Exact) > 0 {
		return equalStrings(r.Exact[1:], argv[1:]), "exact argv differs"
	}
	if escapeClass(r.Program) != "" {
		if _, isEsc, why := escapeInner(r.Program, argv); isEsc {
			return false, why
		}
	}
	p, _, err := parseCommand(argv)
	if err != nil {
		return false, err.Error()
	}
	// Examples are commands without a terminal.
	for _, f := range append(p.findings, p.ttyOnly...) {
		if f.verdict == Deny {
			return false, f.reason
		}
	}
	return r.matchParsed(p)
}
