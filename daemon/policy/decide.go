package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/devtools"
	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
	"github.com/termd/termd/internal/cmdline"
	"github.com/termd/termd/internal/netmode"
	"github.com/termd/termd/internal/program"
)

// Input bounds. Oversized input is denied, never truncated then matched.
const (
	MaxArgs      = 256
	MaxArgBytes  = 64 << 10
	MaxTotalArgv = 1 << 20
	MaxEnvVars   = 64
	maxDepth     = 3
)

type state struct {
	d *decision.Decision
}

func (s *state) step(name, outcome, detail string) {
	s.d.Steps = append(s.d.Steps, decision.Step{Name: name, Outcome: outcome, Detail: detail})
}

// raise makes the decision at least v / r, with a reason.
func (s *state) raise(v verdict.Verdict, r verdict.Risk, reason string) {
	if verdict.VerdictRank(v) > verdict.VerdictRank(s.d.Verdict) {
		s.d.Verdict = v
	}
	s.d.Risk = verdict.MaxRisk(s.d.Risk, r)
	if reason != "" && !grammar.Contains(s.d.Reasons, reason) {
		s.d.Reasons = append(s.d.Reasons, reason)
	}
}

func (s *state) deny(r verdict.Risk, reason string) { s.raise(verdict.Deny, r, reason) }

// Decide decides a request. It never panics and always returns a decision.
func (p *Policy) Decide(req decision.Request, ctx decision.Context) (d decision.Decision) {
	defer func() {
		if r := recover(); r != nil {
			d = decision.Decision{Verdict: verdict.Deny, Risk: verdict.RiskCritical, Reasons: []string{fmt.Sprintf("internal error while deciding: %v", r)}, PolicyVersion: p.version, Mode: req.Mode}
		}
	}()
	dc := &toolspec.DecideCtx{Home: ctx.Home, Sandbox: ctx.Sandbox, SandboxBy: ctx.SandboxBy, Credentials: ctx.Credentials, EgressLists: ctx.EgressLists, Paths: toolspec.PathMemo(ctx.Paths)}
	if dc.Paths == nil {
		dc.Paths = toolspec.PathMemo{}
	}
	for _, w := range ctx.Workspaces {
		if filepath.IsAbs(w) {
			dc.Workspaces = append(dc.Workspaces, dc.Paths.Resolve(w, 0))
		}
	}
	for _, w := range ctx.Protected {
		if filepath.IsAbs(w) {
			dc.Protected = append(dc.Protected, dc.Paths.Resolve(w, 0))
		}
	}
	d = p.decide(req, dc, 0)
	if req.Privileged {
		// After the mode's adjustment: trusted mode does not waive it.
		d.Privileged = true
		s := &state{d: &d}
		s.raise(verdict.Ask, verdict.RiskHigh, "privileged: the command runs as real host root (its files, sockets and secrets), not as root in a user namespace; a person approves each such plan, in every mode")
		s.step("privileged", string(d.Verdict), "runs as real host root")
	}
	if req.Stdin != nil {
		in := *req.Stdin
		d.Stdin = &in
	}
	d.RequestHash = decision.HashRequest(p.canonical(d))
	return d
}

// canonical builds the canonical request of a decision.
func (p *Policy) canonical(d decision.Decision) decision.CanonRequest {
	l := p.Limits()
	c := decision.CanonRequest{
		Argv: d.Argv, ExecArgv: d.ExecArgv, ResolvedPath: d.ResolvedPath, BinarySHA256: d.BinarySHA256,
		Cwd: d.Cwd, Env: d.Env, ExecEnv: d.ExecEnv, Mode: d.Mode, TimeoutMS: d.Timeout.Milliseconds(),
		Limits:  decision.CanonLimits{OutputBytes: l.OutputBytes, MemoryBytes: l.MemoryBytes, Pids: l.Pids, GraceMS: l.Grace.Milliseconds()},
		Network: d.Network, RunAs: d.RunAs, PolicyVersion: d.PolicyVersion, Verdict: d.Verdict, Risk: d.Risk,
		ProjectFiles: d.ProjectFiles, Sandbox: d.Sandbox, Credentials: d.Credentials, Privileged: d.Privileged,
		Stdin: d.Stdin,
	}
	if t := d.TTY; t != nil {
		c.TTY = &decision.CanonTerminal{Rows: t.Rows, Cols: t.Cols, IdleMS: t.Idle.Milliseconds()}
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

func (p *Policy) decide(req decision.Request, ctx *toolspec.DecideCtx, depth int) decision.Decision {
	d := decision.Decision{Verdict: verdict.Allow, Risk: verdict.RiskLow, PolicyVersion: p.version, Rules: []string{}, Reasons: []string{}}
	s := &state{d: &d}

	// --- mode and timeout
	mode := req.Mode
	if mode == "" {
		mode = p.mode
	}
	switch req.Sandbox {
	case "", decision.SandboxReadOnly, decision.SandboxWorkspaceWrite:
	default:
		s.deny(verdict.RiskLow, fmt.Sprintf("sandbox %q is not a profile: ask for %s or %s, or leave it empty for the policy's choice", req.Sandbox, decision.SandboxReadOnly, decision.SandboxWorkspaceWrite))
	}
	checkNetwork(req.Network, ctx, s)
	if _, err := verdict.ParseMode(string(mode)); err != nil {
		s.deny(verdict.RiskLow, err.Error())
		mode = verdict.ModeInspect
	}
	if p.project != nil && p.project.DefaultMode != "" && verdict.ModeRank(mode) > verdict.ModeRank(p.mode) {
		s.deny(verdict.RiskMedium, fmt.Sprintf("mode %s is more permissive than the project policy allows (%s)", mode, p.mode))
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
		s.deny(verdict.RiskLow, "timeout must not be negative")
	case req.Timeout > p.limits.MaxTimeout:
		s.deny(verdict.RiskLow, fmt.Sprintf("timeout %s exceeds the policy maximum %s", req.Timeout, p.limits.MaxTimeout))
	}
	s.step("mode", string(mode), "timeout "+d.Timeout.String())
	d.TTY = p.terminalFor(req.TTY, d.Timeout, s)

	// --- input form and size
	argv, refused := requestArgv(req, s)
	d.Argv = argv
	if refused {
		s.step("input", "deny", strings.Join(d.Reasons, "; "))
		return finish(s)
	}
	s.step("input", "ok", cmdline.Quote(argv))

	// --- environment additions
	p.checkEnv(req.Env, s)

	// --- working directory
	cwd := ""
	if req.Cwd == "" || !filepath.IsAbs(req.Cwd) || len(req.Cwd) > 4096 || strings.IndexByte(req.Cwd, 0) >= 0 {
		s.deny(verdict.RiskMedium, "cwd must be an absolute path")
		s.step("cwd", "deny", req.Cwd)
	} else {
		cwd = ctx.Paths.Resolve(req.Cwd, 0)
		d.Cwd = cwd
		if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
			s.deny(verdict.RiskMedium, "cwd "+cwd+" is not an existing directory")
		}
		in := false
		for _, ws := range ctx.Workspaces {
			if toolspec.Within(ws, cwd) {
				in = true
			}
		}
		if len(ctx.Workspaces) == 0 {
			s.deny(verdict.RiskMedium, "no workspace roots are configured")
		} else if !in {
			s.deny(verdict.RiskHigh, "cwd "+cwd+" is outside the workspace roots")
		}
		s.step("cwd", outcome(in), cwd)
	}

	p.decideArgv(argv, cwd, req, ctx, depth, s)
	if depth == 0 {
		p.checkCredentials(req, ctx, s)
	}
	return finish(s)
}

// requestArgv is the request's argv (split from its command string) within
// the size limits; refused: there is nothing sensible left to decide.
func requestArgv(req decision.Request, s *state) (argv []string, refused bool) {
	argv = req.Argv
	switch {
	case len(req.Argv) > 0 && req.Command != "":
		s.deny(verdict.RiskLow, "send exactly one of argv or command")
		argv = nil
	case req.Command != "":
		if len(req.Command) > MaxTotalArgv {
			s.deny(verdict.RiskMedium, fmt.Sprintf("command string of %d bytes exceeds the %d byte limit", len(req.Command), MaxTotalArgv))
			argv = nil
			break
		}
		w, err := cmdline.Split(req.Command)
		if err != nil {
			s.deny(verdict.RiskMedium, "command string refused: "+err.Error())
			s.step("split", "deny", err.Error())
		} else {
			argv = w
			s.step("split", "ok", fmt.Sprintf("%d words", len(w)))
		}
	case len(req.Argv) == 0:
		s.deny(verdict.RiskLow, "empty command: send argv")
	}
	if len(argv) > MaxArgs {
		s.deny(verdict.RiskMedium, fmt.Sprintf("argv has %d arguments; the limit is %d", len(argv), MaxArgs))
	}
	total := 0
	for i, a := range argv {
		total += len(a) + 1
		if len(a) > MaxArgBytes {
			s.deny(verdict.RiskMedium, fmt.Sprintf("argument %d is %d bytes; the limit is %d", i, len(a), MaxArgBytes))
			break
		}
		if strings.IndexByte(a, 0) >= 0 {
			s.deny(verdict.RiskHigh, fmt.Sprintf("argument %d contains a NUL byte", i))
			break
		}
	}
	if total > MaxTotalArgv {
		s.deny(verdict.RiskMedium, fmt.Sprintf("argv totals %d bytes; the limit is %d", total, MaxTotalArgv))
	}
	return argv, s.d.Verdict == verdict.Deny && (len(argv) == 0 || total > MaxTotalArgv || len(argv) > MaxArgs)
}

func outcome(ok bool) string {
	if ok {
		return "ok"
	}
	return "deny"
}

func finish(s *state) decision.Decision {
	d := s.d
	if d.Verdict == verdict.Deny {
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
		s.deny(verdict.RiskMedium, fmt.Sprintf("%d environment variables requested; the limit is %d", len(env), MaxEnvVars))
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
			s.deny(verdict.RiskHigh, fmt.Sprintf("environment variable name %q is not valid", grammar.Clip(grammar.Printable(k))))
			continue
		}
		if len(v) > MaxArgBytes || strings.IndexByte(v, 0) >= 0 {
			s.deny(verdict.RiskMedium, fmt.Sprintf("environment variable %s has a value that is too large or contains NUL", k))
			continue
		}
		denied := false
		for _, pat := range p.envDenyList() {
			if envPatternMatch(pat, k) {
				s.deny(verdict.RiskHigh, fmt.Sprintf("environment variable %s is a loader, hook or tool-control variable (%s) and is denied", k, pat))
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
			s.raise(verdict.Ask, verdict.RiskMedium, fmt.Sprintf("environment variable %s is not in the policy's allowlist (env.allow): a person decides whether the command gets it", k))
		}
		if why := envValueProblem(k, v); why != "" {
			s.deny(verdict.RiskHigh, fmt.Sprintf("environment variable %s=%s is refused: %s", k, grammar.Clip(grammar.Printable(v)), why))
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

func isExecFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// resolveProgram finds name in the trusted PATH; returns the candidate
// path and its real path.
func (p *Policy) resolveProgram(name string, ctx *toolspec.DecideCtx) (string, string) {
	for _, dir := range p.spec.TrustedPath {
		rd := ctx.Paths.Resolve(dir, 0)
		if toolspec.InAnyWorkspace(rd, ctx) {
			continue
		}
		cand := dir + "/" + name
		if !isExecFile(cand) {
			continue
		}
		real := ctx.Paths.Resolve(cand, 0)
		if toolspec.InAnyWorkspace(real, ctx) {
			continue
		}
		return cand, real
	}
	return "", ""
}

// workspaceProgram is a program named by path that is an executable regular
// file inside a workspace, or nil.
func workspaceProgram(a0, cwd string, ctx *toolspec.DecideCtx) *toolspec.ProjectCode {
	if cwd == "" && !filepath.IsAbs(a0) {
		return nil
	}
	real := ctx.Paths.ResolvePath(cwd, a0)
	if !toolspec.InAnyWorkspace(real, ctx) || !isExecFile(real) {
		return nil
	}
	return &toolspec.ProjectCode{File: real, Program: true, Why: "runs project code: " + a0 + " is a program in the workspace (" + real + "); its arguments are not analysed"}
}

// venvInterpreter: argv[0] names, inside a workspace, a symbolic link to an
// interpreter that is the very file the trusted PATH resolves for its name
// (a virtual environment's .venv/bin/python -> /usr/bin/python3.11). It
// returns argv with the interpreter's bare name, to be decided as that
// interpreter, and why; or nil.
func (p *Policy) venvInterpreter(argv []string, cwd string, ctx *toolspec.DecideCtx) ([]string, string) {
	a0 := argv[0]
	if !strings.Contains(a0, "/") || cwd == "" {
		return nil, ""
	}
	link := a0
	if !filepath.IsAbs(link) {
		link = cwd + "/" + link
	}
	link = filepath.Clean(link)
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 || !toolspec.InAnyWorkspace(ctx.Paths.Resolve(filepath.Dir(link), 0), ctx) {
		return nil, ""
	}
	real := ctx.Paths.Resolve(link, 0)
	base := grammar.BaseName(real)
	if toolspec.InAnyWorkspace(real, ctx) || toolspec.EscapeClass(base) != "interpreter" {
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
func interpretedScript(argv []string, cwd string, ctx *toolspec.DecideCtx) *toolspec.ProjectCode {
	if len(argv) < 2 || cwd == "" || argv[1] == "" || strings.HasPrefix(argv[1], "-") || strings.HasPrefix(argv[1], "+") {
		return nil
	}
	real := ctx.Paths.ResolvePath(cwd, argv[1])
	fi, err := os.Stat(real)
	if err != nil || !fi.Mode().IsRegular() || !toolspec.InAnyWorkspace(real, ctx) {
		return nil
	}
	return &toolspec.ProjectCode{File: real, Why: "runs project code: " + grammar.BaseName(argv[0]) + " (" + toolspec.EscapeClass(grammar.BaseName(argv[0])) + ") runs the workspace file " + argv[1] + " (" + real + "); its arguments are not analysed"}
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
	req   decision.Request
	ctx   *toolspec.DecideCtx
	depth int
	s     *state
	d     *decision.Decision

	tool    *toolspec.ToolSpec    // the registry's spec for base, or nil
	project *toolspec.ProjectCode // the command runs a workspace file
	exact   *rule                 // an exact rule names this argv
	class   string                // escape class of base

	resolved, real string // the program as named and its real path
	pc             *grammar.Parsed
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
	wrap *toolspec.Wrapped
}

// decideArgv decides the command itself in stages, each named after the
// explain step it reports; a stage returns false when the decision is made.
// The exec stage reports no step: its result is the decision's exec_argv
// and exec_env.
func (p *Policy) decideArgv(argv []string, cwd string, req decision.Request, ctx *toolspec.DecideCtx, depth int, s *state) {
	if sub, why, ifMissing := toolspec.BuiltinForm(argv); sub != nil {
		if cand, _ := p.resolveProgram(grammar.BaseName(argv[0]), ctx); !ifMissing || cand == "" && !strings.Contains(argv[0], "/") {
			// A shell builtin or keyword: what it asks is decided (and
			// runs) as the program that answers it.
			s.raise(verdict.Allow, verdict.RiskLow, why)
			s.step("builtin", "substituted", cmdline.Quote(sub))
			argv = sub
		}
	}
	venv := ""
	if sub, why := p.venvInterpreter(argv, cwd, ctx); sub != nil {
		// The workspace's own environment's interpreter (.venv/bin/python):
		// decided as the interpreter it links to, run by the workspace
		// path (which makes the environment's packages the ones used).
		s.raise(verdict.Allow, verdict.RiskLow, why)
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
		s.deny(verdict.RiskCritical, "program name "+cmdline.Quote([]string{a0})+" "+what)
		s.step("program", "deny", "bad program name")
		return false
	}
	c.base = grammar.BaseName(a0)
	c.tool = toolspec.ToolNamed(c.base)
	// Project code: a program inside a workspace named by its path
	// (./scripts/x.sh, or its absolute path), or a script of the workspace
	// run by its interpreter (python3 x.py). No rule knows what it does, so
	// it asks (confirm mode) instead of being refused.
	if strings.Contains(a0, "/") {
		c.project = workspaceProgram(a0, c.cwd, c.ctx)
	} else if toolspec.RunsScripts(c.base) {
		c.project = interpretedScript(c.argv, c.cwd, c.ctx)
	}
	if strings.Contains(a0, "/") && !filepath.IsAbs(a0) && c.project == nil {
		s.deny(verdict.RiskCritical, "program path "+a0+" is relative; send a bare program name resolved by the trusted PATH")
		s.step("program", "deny", "relative path")
		c.p.inner(append([]string{c.base}, c.argv[1:]...), c.cwd, c.req, c.ctx, c.depth, s)
		return false
	}
	if c.base == "." || c.base == ".." || c.base == "" {
		s.deny(verdict.RiskCritical, "program name "+a0+" is not a file name")
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
	c.class = toolspec.EscapeClass(c.base)
	if c.req.TTY != nil && c.class == "interpreter" && c.exact == nil && c.project == nil && replArgs(c.argv[1:]) {
		c.repl = true
		c.s.step("escape", "repl", c.base+" without a script on a terminal: what is typed is code")
		return true
	}
	if c.class == "interpreter" && c.exact == nil && c.project == nil && !c.repl {
		if devtools.InterpreterInfo(c.base, c.argv) {
			c.info = true
			c.s.step("escape", "version", c.base+" "+c.argv[1]+" prints the interpreter's version or help; no code runs")
			return true
		}
		if pc := devtools.InterpreterProject(c.base, c.argv); pc != nil {
			c.project = pc
			c.s.step("escape", "project code", pc.Why)
			return true
		}
	}
	if c.class == "program-running wrapper" && c.exact == nil && c.project == nil {
		if w := toolspec.UnwrapCommand(c.base, c.argv); w != nil {
			c.wrap = w
			c.s.step("escape", "wrapper", c.base+" runs "+cmdline.Quote(w.Inner)+", which is decided as itself")
			return true
		}
	}
	if c.class != "" && c.exact == nil && c.project == nil {
		if inner, isEsc, why := toolspec.EscapeInner(c.base, c.argv); isEsc {
			c.s.deny(verdict.RiskCritical, why)
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
	if project != nil && project.Program {
		resolved, real = project.File, project.File
	} else if filepath.IsAbs(a0) {
		clean := filepath.Clean(a0)
		cr := c.ctx.Paths.Resolve(clean, 0)
		if p.pinned(base, clean) {
			resolved, real = clean, cr
			if !isExecFile(cr) {
				s.deny(verdict.RiskHigh, "pinned program "+clean+" is not an executable file")
				return false
			}
		} else {
			_, tr := p.resolveProgram(base, c.ctx)
			if tr == "" || tr != cr {
				s.deny(verdict.RiskCritical, "absolute program path "+clean+" is not the file the trusted PATH resolves for "+base)
				s.step("identity", "deny", clean)
				return false
			}
			resolved, real = clean, cr
		}
	} else {
		resolved, real = p.resolveProgram(base, c.ctx)
		if resolved == "" {
			s.deny(verdict.RiskHigh, "program "+base+" was not found in the trusted PATH ("+strings.Join(p.spec.TrustedPath, ":")+")")
			s.step("identity", "deny", base)
			return false
		}
	}
	for _, ws := range c.ctx.Workspaces {
		if toolspec.Within(ws, real) && (project == nil || !project.Program) {
			s.deny(verdict.RiskCritical, "program "+real+" is inside a workspace")
			return false
		}
	}
	if rc := toolspec.EscapeClass(grammar.BaseName(real)); rc != "" && c.class == "" && project == nil {
		s.deny(verdict.RiskCritical, fmt.Sprintf("program %s resolves to %s, a %s", base, real, rc))
		return false
	}
	sum, err := toolspec.FileSHA256(real)
	if err != nil {
		s.deny(verdict.RiskHigh, "cannot hash program "+real+": "+err.Error())
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
		s.deny(verdict.RiskHigh, c.base+": wrappers nested too deeply; send the command itself")
		return false
	}
	env := map[string]string{}
	for k, v := range c.req.Env {
		env[k] = v
	}
	for k, v := range w.Env {
		env[k] = v // checked against the env policy as the command's own
	}
	sub := decision.Request{Argv: w.Inner, Cwd: c.req.Cwd, Env: env, Mode: c.req.Mode, Timeout: c.req.Timeout, Sandbox: c.req.Sandbox, TTY: c.req.TTY, Network: c.req.Network}
	if w.Chdir != "" {
		sub.Cwd = toolspec.ResolvePath(c.cwd, w.Chdir)
	}
	in := c.p.decide(sub, c.ctx, c.depth+1)
	inner := grammar.Clip(cmdline.Quote(w.Inner))
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
	for _, v := range w.Reads {
		c.wrapperPath(v, false)
	}
	for _, v := range w.Writes {
		c.wrapperPath(v, true)
	}
	if w.StdinArgs && d.Verdict != verdict.Deny && d.Mode != verdict.ModeTrusted && (!c.ctx.Sandbox || !in.ReadOnly) {
		s.raise(verdict.Ask, verdict.RiskMedium, c.base+" adds arguments it reads from its input, which the policy cannot check (a fully enforced sandbox confines what a read-only command reads; a command that writes asks)")
	}
	if d.Verdict == verdict.Deny || len(in.ExecArgv) == 0 {
		return false
	}
	run := slices.Clone(in.ExecArgv)
	if !strings.Contains(run[0], "/") {
		if cand, _ := c.p.resolveProgram(grammar.BaseName(run[0]), c.ctx); cand != "" {
			run[0] = cand
		}
	}
	d.ExecArgv = slices.Clone(w.Prefix)
	d.ExecArgv[0] = c.a0
	if w.EnvLast {
		for _, k := range toolspec.SortedKeys(in.ExecEnv) {
			d.ExecArgv = append(d.ExecArgv, k+"="+in.ExecEnv[k])
		}
	}
	d.ExecArgv = append(d.ExecArgv, run...)
	d.ExecEnv = in.ExecEnv
	return false
}

// wrapperPath checks a file a wrapper itself reads or writes.
func (c *command) wrapperPath(v string, write bool) {
	real := c.ctx.Paths.ResolvePath(c.cwd, v)
	pv := c.p.checkPath(real, write, false, c.ctx)
	c.s.raise(pv.Verdict, pv.Risk, pv.Reason)
	if write {
		c.d.Writes = append(c.d.Writes, real)
		c.d.ReadOnly = false
		if toolspec.InAnyWorkspace(real, c.ctx) {
			if c.d.Sandbox.Profile == decision.SandboxReadOnly {
				c.d.Sandbox.Profile = decision.SandboxWorkspaceWrite
			}
		} else if pv.Verdict != verdict.Deny {
			c.d.Sandbox.Write = append(c.d.Sandbox.Write, real)
		}
		if c.d.Mode == verdict.ModeInspect {
			c.s.deny(verdict.RiskMedium, "inspect mode runs only read-only commands ("+c.base+" writes "+real+")")
		}
		if c.d.Mode == verdict.ModeConfirm && c.d.Verdict == verdict.Allow {
			c.s.raise(verdict.Ask, verdict.RiskMedium, "confirm mode: approval needed because "+c.base+" writes "+real)
		}
	} else if !toolspec.InAnyWorkspace(real, c.ctx) && !c.p.systemRead(real) && pv.Verdict != verdict.Deny {
		c.d.Sandbox.Read = append(c.d.Sandbox.Read, real)
	}
}

// grammar: the arguments read with the tool's grammar.
func (c *command) grammar() bool {
	s, base := c.s, c.base
	switch {
	case c.info:
		c.pc = &grammar.Parsed{Tool: base}
		s.step("grammar", "version", "no code runs")
	case c.project != nil:
		c.pc = &grammar.Parsed{Tool: base, Unparsed: true, Code: true, Net: c.project.Net}
		if c.project.File != "" {
			c.pc.Paths = append(c.pc.Paths, grammar.Operand{Value: c.project.File, Kind: grammar.KPathRead})
		}
		for _, r := range c.project.Reads {
			c.pc.Paths = append(c.pc.Paths, grammar.Operand{Value: r, Kind: grammar.KPathRead})
		}
		s.step("grammar", "project code", c.project.Why)
	case c.exact != nil:
		c.pc = &grammar.Parsed{Tool: base, Unparsed: true}
		s.step("grammar", "exact", "rule "+c.exact.ID+" names this argv exactly")
	case c.repl:
		c.pc = &grammar.Parsed{Tool: base, Unparsed: true, Code: true}
		s.step("grammar", "repl", "a REPL's input is not analysed")
	default:
		pc, known, err := toolspec.ParseCommand(append([]string{base}, c.argv[1:]...))
		if err != nil {
			// An option or subcommand the grammar does not know is not a
			// danger in itself: the command is unknown code, like a program
			// no rule knows (read-only sandbox when it is enforced, else
			// ask). What the grammar refused before it stopped still holds.
			c.unknownArgs = base + ": " + err.Error()
			for _, f := range pc.Findings {
				s.raise(f.Verdict, f.Risk, f.Reason)
			}
			c.pc = &grammar.Parsed{Tool: base, Unparsed: true}
			// Arguments that name files are still checked as reads: a
			// bogus option must not turn a denied read (a secret, termd's
			// own files) into unknown code.
			for _, a := range c.argv[1:] {
				if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "--") {
					a = v
				}
				if a != "" && !strings.HasPrefix(a, "-") && (strings.Contains(a, "/") || toolspec.Exists(c.cwd, a)) {
					c.pc.Paths = append(c.pc.Paths, grammar.Operand{Value: a, Kind: grammar.KPathRead})
				}
			}
			s.step("grammar", "unknown", err.Error()+": the arguments are not analysed; the command runs as unknown code")
			return true
		}
		c.pc = pc
		if !known {
			s.step("grammar", "none", "no grammar for "+base+"; arguments are not analysed")
		} else {
			s.step("grammar", "ok", pc.CmdName())
		}
		if pc.Write || pc.Code {
			// Directory options of a command that writes or builds: the
			// command works (and writes) there.
			for i := range pc.Paths {
				if pc.Paths[i].Kind == grammar.KPathRead && pc.Paths[i].DirOpt {
					pc.Paths[i].Kind = grammar.KPathWrite
				}
			}
		}
		for _, f := range pc.Findings {
			s.raise(f.Verdict, f.Risk, f.Reason)
		}
		if c.req.TTY == nil {
			// Interactive options (git add -p) need the terminal they ask for.
			for _, f := range pc.TtyOnly {
				s.raise(f.Verdict, f.Risk, f.Reason)
			}
		}
		for _, in := range pc.Inner {
			c.p.inner(in, c.cwd, c.req, c.ctx, c.depth, s)
		}
	}
	return true
}

// hook runs one tool hook on the command and applies what it reported.
func (c *command) hook(h func(*toolspec.ToolCall)) {
	tc := &toolspec.ToolCall{Pc: c.pc, Cwd: c.cwd, Ctx: c.ctx, Entries: c.entries, ExecArgv: c.d.ExecArgv, ExecEnv: c.d.ExecEnv}
	h(tc)
	for _, f := range tc.Denials {
		c.s.deny(f.Risk, f.Reason)
	}
	c.d.ExecArgv, c.d.ExecEnv = tc.ExecArgv, tc.ExecEnv
}

// hookReads runs a hook that names files the command reads.
func (c *command) hookReads(h func(*toolspec.ToolCall) []string) {
	for _, f := range h(&toolspec.ToolCall{Pc: c.pc, Cwd: c.cwd, Ctx: c.ctx}) {
		c.pc.Paths = append(c.pc.Paths, grammar.Operand{Value: f, Kind: grammar.KPathRead})
	}
}

// paths: every path the command reads or writes, resolved and checked.
func (c *command) paths() bool {
	pc, cwd, ctx, s, t := c.pc, c.cwd, c.ctx, c.s, c.tool
	if t != nil && t.FixedReads != nil && cwd != "" {
		c.hookReads(t.FixedReads)
	}
	// The entry files are found once: read-checked here, scanned (.npmrc)
	// and bound to the request below.
	c.entries = toolspec.ProjectEntryPaths(t, pc, cwd, ctx)
	if c.project != nil {
		c.entries = nil
		if c.project.File != "" {
			c.entries = []string{c.project.File}
		}
		if et := c.project.EntryTool; et != "" {
			c.entries = toolspec.ProjectEntryPaths(toolspec.ToolNamed(et), &grammar.Parsed{Tool: et}, cwd, ctx)
		}
	}
	for _, f := range c.entries {
		// Tools read these by fixed names: a link to a root-only file
		// would be printed in a parse error.
		if _, err := os.Lstat(f); err == nil {
			pc.Paths = append(pc.Paths, grammar.Operand{Value: f, Kind: grammar.KPathRead})
		}
	}
	for _, f := range toolspec.EnvReads(s.d.Env) {
		pc.Paths = append(pc.Paths, grammar.Operand{Value: f, Kind: grammar.KPathRead})
	}
	if t != nil && t.DerivedReads != nil && cwd != "" {
		c.hookReads(t.DerivedReads)
	}
	c.writes, c.reads = c.p.checkPaths(pc, cwd, ctx, s)
	if t != nil && t.Check != nil {
		c.hook(t.Check)
	}
	return true
}

// rules: the policy's rules for the program.
func (c *command) rules() bool {
	p, s, d, pc, project, exact := c.p, c.s, c.d, c.pc, c.project, c.exact
	for _, r := range p.byProg[c.base] {
		if project != nil && project.Program {
			break // a workspace program is not the tool its name says
		}
		if r.Path != "" && r.Path != filepath.Clean(c.a0) && r.Path != c.resolved && c.ctx.Paths.Resolve(r.Path, 0) != c.real {
			continue
		}
		if c.unknownArgs != "" && r.verdict == verdict.Allow {
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
		s.raise(verdict.Allow, verdict.RiskHigh, "")
		s.step("rules", "repl", c.base)
	case project != nil:
		s.raise(verdict.Allow, verdict.RiskHigh, project.Why)
		s.step("rules", "project code", project.File+project.Module)
	case c.info:
		s.raise(verdict.Allow, verdict.RiskLow, c.base+" "+c.argv[1]+" prints the interpreter's version or help (no code runs)")
		s.step("rules", "version", c.base)
	case len(c.sys) == 0 && c.unknownArgs != "":
		// A known program with arguments its grammar does not read: as
		// unknown as a program no rule knows.
		pc.Code = true
		s.raise(verdict.Allow, verdict.RiskHigh, c.unknownArgs+": termd's grammar does not know it, so the command runs as unknown code, like a program no rule knows (its arguments are not analysed)")
		s.step("rules", "unknown arguments", c.unknownArgs)
	case len(c.sys) == 0 && pc.Unparsed && exact == nil && c.class == "":
		// A program no rule and no grammar knows: unknown code, like a
		// project's own script. Its arguments are not analysed.
		pc.Code = true
		s.raise(verdict.Allow, verdict.RiskHigh, "no policy rule knows "+c.base+": it runs as unknown code, like project code (its arguments are not analysed)")
		s.step("rules", "unknown program", c.base)
	case len(c.sys) == 0 && pc.InfoOnly():
		s.raise(verdict.Allow, verdict.RiskLow, pc.Tool+" only prints its version or help")
		s.step("rules", "version or help", pc.Tool)
	case len(c.sys) == 0 && exact == nil && c.class == "":
		// A program the grammar reads but no rule covers: the policy does
		// not know this use of it, which is not a danger in itself.
		pc.Unparsed, pc.Code = true, true
		s.raise(verdict.Allow, verdict.RiskHigh, "no policy rule covers "+pc.CmdName()+": it runs as unknown code, like a program no rule knows")
		s.step("rules", "no matching rule", pc.CmdName())
	case len(c.sys) == 0:
		s.deny(verdict.RiskHigh, "no policy rule allows "+pc.CmdName())
		s.step("rules", "deny", "no matching rule")
	}
	alreadyDenied := d.Verdict == verdict.Deny
	for _, r := range append(c.sys, c.proj...) {
		d.Rules = append(d.Rules, r.ID)
		if alreadyDenied && r.verdict != verdict.Deny {
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
	c.askedWrite = c.req.Sandbox == decision.SandboxWorkspaceWrite
	if c.askedWrite {
		// Writes the grammar did not see: for a program without a grammar
		// that is running project code.
		pc.Write = true
		if pc.Unparsed {
			pc.Code = true
		}
	}
	d.Writes = c.writes
	c.netMode = networkFor(fetchNetwork(c.req.Network, pc, c.ctx), pc, c.ctx.Sandbox, s)
	d.Network = pc.Net
	d.RunsProjectCode = pc.Code
	c.write = pc.Write || len(c.writes) > 0 || pc.Unparsed
	d.ReadOnly = !c.write && !pc.Net && !pc.Code && !pc.Unparsed
	if pc.Code {
		s.raise(verdict.Allow, verdict.RiskHigh, "")
	}
	if c.write || pc.Net {
		s.raise(verdict.Allow, verdict.RiskMedium, "")
	}
	if pc.Write && cwd != "" {
		if why := p.protectedWrite(cwd, c.ctx); why != "" {
			s.deny(verdict.RiskCritical, "command writes in "+cwd+", which is protected: "+why)
		}
	}
	if pc.Net && !p.NetworkAllowed() {
		s.deny(verdict.RiskMedium, pc.CmdName()+" uses the network, which the policy denies")
	}
	s.step("effects", fmt.Sprintf("write=%t network=%t project_code=%t", c.write, pc.Net, pc.Code), strings.Join(c.writes, ","))
	return true
}

// project-files: the entry files of project code, bound to the request.
func (c *command) projectFiles() bool {
	s, pc := c.s, c.pc
	if pf := toolspec.ProjectFiles(pc, c.entries); len(pf) > 0 {
		c.d.ProjectFiles = pf
		var shown []string
		for _, k := range toolspec.SortedKeys(pf) {
			shown = append(shown, k+"="+pf[k])
			// A digest that does not follow the content (a FIFO, a huge
			// file) would let the file change after approval unseen.
			if v := pf[k]; v != "absent" && !strings.HasPrefix(v, "sha256:") {
				s.deny(verdict.RiskHigh, pc.Tool+" would run "+k+", which cannot be bound to an approval ("+v+"); make it a regular file under 16 MiB")
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
	unknown := pc.Unparsed && toolspec.EscapeClass(c.base) == "" && c.project == nil
	if (unknown && !c.askedWrite) || c.req.Sandbox == decision.SandboxReadOnly {
		d.Sandbox.Profile = decision.SandboxReadOnly
	}
	c.unknownRO = ctx.Sandbox && unknown && !c.askedWrite && !pc.Net
	// The kernel holds project code to the workspace when the sandbox is
	// fully enforced: offline project code that writes only there needs no
	// approval (see docs/SANDBOX.md, "Approval economy").
	d.Sandbox.NetworkMode = string(c.netMode)
	d.Sandbox.Network = c.netMode == netmode.Host
	// A package fetch through the registries allow-list is held like
	// offline project code (fetch.go).
	c.fetchFree = c.fetchContained()
	c.confined = ctx.Sandbox && pc.Code && (!pc.Net || c.fetchFree) && len(d.Sandbox.Write) == 0 && len(d.Sandbox.Read) == 0
	c.s.step("sandbox", d.Sandbox.Profile, fmt.Sprintf("network=%s enforced=%t", d.Sandbox.NetworkMode, ctx.Sandbox))
	return true
}

// sandboxedWrite decides whether a write is a plain write inside the
// workspace that the enforced sandbox confines completely (see the policy
// setting sandboxed_workspace_writes): it reports the step outcome (allow,
// ask, or "" when the question does not arise) and its detail.
func (c *command) sandboxedWrite() (string, string) {
	d, pc, ctx := c.d, c.pc, c.ctx
	if d.Mode != verdict.ModeConfirm || !c.write || pc.Code || pc.Unparsed || d.Verdict != verdict.Allow {
		return "", "" // not a write, or project code, or already asking or denied for its own reasons
	}
	if !ctx.Sandbox {
		return "ask", "no fully enforced sandbox (sandbox off, unavailable or partial): writes ask"
	}
	ws := ""
	for _, w := range ctx.Workspaces {
		if toolspec.Within(w, c.cwd) {
			ws = w
			break
		}
	}
	var why []string
	switch {
	case pc.Net:
		why = append(why, "it uses the network")
	case d.Sandbox.Profile != decision.SandboxWorkspaceWrite || len(d.Sandbox.Write) > 0 || len(d.Sandbox.Read) > 0 || ws == "":
		why = append(why, "its sandbox is not the plain workspace-write profile")
	case d.RunAs != "":
		why = append(why, "it runs as "+d.RunAs)
	case verdict.RiskRank(d.Risk) > verdict.RiskRank(verdict.RiskMedium):
		why = append(why, "its risk is "+string(d.Risk))
	case pc.Spec == nil || !pc.Spec.PlainWrite:
		why = append(why, pc.CmdName()+" is not a plain edit (it may remove, discard or write files the policy did not check)")
	case pc.Recursive:
		why = append(why, "it writes recursively (files the policy did not check)")
	}
	why = append(why, pc.NotPlain...)
	for _, w := range c.writes {
		if toolspec.EntryFileName(w) {
			why = append(why, w+" is an entry file that later commands run or build from")
		}
	}
	if len(why) > 0 {
		return "ask", "not a plain workspace write: " + strings.Join(why, "; ")
	}
	by := ctx.SandboxBy
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
	case verdict.ModeInspect:
		if !d.ReadOnly {
			s.deny(d.Risk, "inspect mode runs only read-only commands")
		}
	case verdict.ModeConfirm:
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
		if pc.Code && !free {
			why = append(why, "runs project code")
		}
		if pc.Net && !c.fetchFree {
			why = append(why, "uses the network")
		}
		switch {
		case len(why) > 0 || d.Verdict != verdict.Allow:
		case c.unknownRO:
			s.d.Reasons = append(s.d.Reasons, "confirm mode: the policy does not know this command of "+pc.Tool+"; it runs without approval inside the read-only sandbox (it can read what cat could and print it; plan with sandbox workspace-write to let it write in the workspace, as project code)")
		case c.fetchFree:
			s.d.Reasons = append(s.d.Reasons, "confirm mode: a package fetch runs without approval inside the "+d.Sandbox.Profile+" sandbox with network "+string(c.netMode)+" (it reaches only the package registries, through termd's proxy; install scripts run contained: writes only in the workspace and its caches, enforced by the kernel)")
		case c.confined:
			s.d.Reasons = append(s.d.Reasons, "confirm mode: project code runs without approval inside the "+d.Sandbox.Profile+" sandbox (no network beyond its workspace loopback, writes only in the workspace, enforced by the kernel)")
		case c.plainFree:
			s.d.Reasons = append(s.d.Reasons, "confirm mode: sandboxed-workspace-write: allowed without approval, "+c.plainWhy+" (policy setting sandboxed_workspace_writes: allow)")
		}
		if len(why) > 0 && d.Verdict == verdict.Allow {
			reason := "confirm mode: approval needed because the command " + strings.Join(why, ", ")
			if c.plainWhy != "" && grammar.Contains(why, "writes") {
				reason += " (" + c.plainWhy + ")"
			}
			s.raise(verdict.Ask, d.Risk, reason)
		}
	case verdict.ModeTrusted:
		if d.Verdict == verdict.Ask {
			d.Verdict = verdict.Allow
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
	if c.project != nil && c.project.Program {
		ps = toolspec.Program{} // mandatory arguments belong to the tool of that name, not to this file
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
		for _, r := range t.Runs {
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
		if t.Forced != nil {
			c.hook(t.Forced)
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
func (p *Policy) inner(argv []string, cwd string, req decision.Request, ctx *toolspec.DecideCtx, depth int, s *state) {
	if len(argv) == 0 || depth >= maxDepth {
		return
	}
	sub := decision.Request{Argv: argv, Cwd: req.Cwd, Mode: req.Mode, Timeout: req.Timeout}
	id := p.decide(sub, ctx, depth+1)
	if id.Verdict == verdict.Allow {
		s.step("inner", "allow", cmdline.Quote(argv))
		return
	}
	for _, r := range id.Reasons {
		s.raise(verdict.Deny, "", "inner command "+grammar.Clip(cmdline.Quote(argv))+": "+r)
	}
	s.step("inner", string(id.Verdict), cmdline.Quote(argv))
}

func (p *Policy) checkPaths(pc *grammar.Parsed, cwd string, ctx *toolspec.DecideCtx, s *state) (writes, reads []string) {
	if cwd == "" {
		return nil, nil
	}
	all := append(append([]grammar.Operand(nil), pc.Operands...), pc.Paths...)
	// A tool that changes directory for each -C in turn before anything
	// else (git): its operands and path options are relative to where it
	// ends up.
	base := cwd
	t := toolspec.ToolNamed(pc.Tool)
	if t != nil && t.Chdir != "" {
		base = t.WorkDir(pc, cwd)
		var rest []grammar.Operand
		chdir, c := grammar.Operand{Value: base, Kind: grammar.KPathRead}, t.Grammar.OptIndex[t.Chdir]
		for _, op := range all {
			if op.From == c {
				if op.Kind == grammar.KPathWrite {
					chdir.Kind = grammar.KPathWrite
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
		real := ctx.Paths.ResolvePath(base, v)
		pv := p.checkPath(real, write, t != nil && t.NamesOnly && !pc.Recursive, ctx)
		if pv.Reason != "" || pv.Verdict != verdict.Allow {
			s.raise(pv.Verdict, pv.Risk, pv.Reason)
		} else {
			s.raise(verdict.Allow, pv.Risk, "")
		}
		if !write && pc.Recursive && pv.Verdict != verdict.Deny && toolspec.RecursiveOutside(real) {
			if !toolspec.InAnyWorkspace(real, ctx) {
				s.raise(verdict.Ask, verdict.RiskHigh, pc.CmdName()+" reads "+real+" recursively: files below it (keys, credentials readable only by root) are not checked")
			}
		}
		if write && !grammar.Contains(writes, real) {
			writes = append(writes, real)
		}
		if !write && pv.Verdict != verdict.Deny && !grammar.Contains(reads, real) {
			reads = append(reads, real)
		}
		if write && toolspec.IsSetID(real) && (t == nil || !t.WritesNoContent) {
			// Writing a setuid/setgid file as root keeps its bits: new
			// content would run with the owner's privileges.
			s.deny(verdict.RiskCritical, "write to "+real+" is denied: it is setuid/setgid, and a write by root keeps those bits (remove them first: chmod u-s,g-s)")
		}
		if write && pc.BackupSuffix != "" && !strings.HasSuffix(v, pc.BackupSuffix) {
			// The replaced destination is renamed next to it.
			check(v+pc.BackupSuffix, true)
		}
		if write && t != nil && t.Removes {
			for _, ws := range ctx.Workspaces {
				if toolspec.Within(real, ws) {
					s.deny(verdict.RiskCritical, pc.Tool+": "+real+" is a workspace root (or contains one); removing the workspace itself is denied")
				}
			}
		}
		return real
	}
	n := 0
	var sources []string
	for i, op := range all {
		if op.Value == "" || op.Value == "-" && op.Kind != grammar.KPathWrite {
			continue
		}
		switch op.Kind {
		case grammar.KPathRead, grammar.KPathWrite:
			n++
			real := check(op.Value, op.Kind == grammar.KPathWrite)
			if i < len(pc.Operands)-1 {
				sources = append(sources, op.Value)
			}
			// cp/mv/ln into an existing directory write DIR/basename(src)
			if pc.CopyInto && op.Kind == grammar.KPathWrite && i == len(pc.Operands)-1 {
				if fi, err := os.Stat(real); err == nil && fi.IsDir() {
					for _, src := range sources {
						// Not filepath.Join: it would drop "L/.." before the
						// kernel follows the link L.
						check(real+"/"+pc.IntoName(src), true)
					}
				}
			}
		}
	}
	s.step("paths", fmt.Sprintf("%d checked", n), strings.Join(writes, ","))
	return writes, reads
}

// matchParsed checks the rule's subcommand and option constraints.
func (r *rule) matchParsed(p *grammar.Parsed) (bool, string) {
	if r.subs != nil {
		if p.Unparsed || len(p.Subs) == 0 || !r.subs[p.Subs[0]] {
			return false, "subcommand not listed"
		}
	}
	if len(r.Options) > 0 && !p.Has(r.Options...) {
		return false, "none of the options " + strings.Join(r.Options, ",") + " present"
	}
	return true, ""
}

// matches is used for the rule's own examples: program, grammar, hidden
// execution findings and constraints (no file system access).
func (r *rule) matches(argv []string) (bool, string) {
	if grammar.BaseName(argv[0]) != r.Program {
		return false, "different program"
	}
	if len(r.Exact) > 0 {
		return equalStrings(r.Exact[1:], argv[1:]), "exact argv differs"
	}
	if toolspec.EscapeClass(r.Program) != "" {
		if _, isEsc, why := toolspec.EscapeInner(r.Program, argv); isEsc {
			return false, why
		}
	}
	p, _, err := toolspec.ParseCommand(argv)
	if err != nil {
		return false, err.Error()
	}
	// Examples are commands without a terminal.
	for _, f := range append(p.Findings, p.TtyOnly...) {
		if f.Verdict == verdict.Deny {
			return false, f.Reason
		}
	}
	return r.matchParsed(p)
}
