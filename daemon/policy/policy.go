// Package policy decides, from declarative data, whether termd may run a
// command: it parses argv per tool grammar, resolves the program and every
// path, and returns allow / ask / deny with a risk, reasons and rule ids.
//
// The package is pure domain logic: no transport, no execution.
package policy

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
	"go.yaml.in/yaml/v3"
)

// ---- file schema -------------------------------------------------------

type fileSpec struct {
	Version     int    `yaml:"version" json:"version"`
	Kind        string `yaml:"kind,omitempty" json:"kind,omitempty"`
	Name        string `yaml:"name" json:"name"`
	DefaultMode string `yaml:"default_mode" json:"default_mode"`
	Network     bool   `yaml:"network" json:"network"`
	// SandboxedWorkspaceWrites: allow (the default) or ask. See
	// SandboxedWorkspaceWrites().
	SandboxedWorkspaceWrites string                      `yaml:"sandboxed_workspace_writes,omitempty" json:"sandboxed_workspace_writes,omitempty"`
	TrustedPath              []string                    `yaml:"trusted_path" json:"trusted_path"`
	Limits                   limitsSpec                  `yaml:"limits" json:"limits"`
	Env                      envSpec                     `yaml:"env" json:"env"`
	Paths                    pathsSpec                   `yaml:"paths" json:"paths"`
	Programs                 map[string]toolspec.Program `yaml:"programs" json:"programs"`
	Rules                    []ruleSpec                  `yaml:"rules" json:"rules"`
}

type limitsSpec struct {
	DefaultTimeout string `yaml:"default_timeout" json:"default_timeout"`
	MaxTimeout     string `yaml:"max_timeout" json:"max_timeout"`
	OutputBytes    int64  `yaml:"output_bytes" json:"output_bytes"`
	OutputBudget   int64  `yaml:"output_budget,omitempty" json:"output_budget,omitempty"`
	MemoryBytes    int64  `yaml:"memory_bytes" json:"memory_bytes"`
	Pids           int64  `yaml:"pids" json:"pids"`
	Grace          string `yaml:"grace" json:"grace"`
}

type envSpec struct {
	Allow []string `yaml:"allow" json:"allow"`
	Deny  []string `yaml:"deny" json:"deny"`
}

type pathsSpec struct {
	SensitiveRead []string `yaml:"sensitive" json:"sensitive"`
	SystemRead    []string `yaml:"system_read" json:"system_read"`
	// PublicRead: beneath system_read, what a command may read outside the
	// workspace without approval (toolchain directories, non-sensitive
	// facts). The rest of system_read asks in confirm and inspect mode.
	PublicRead     []string `yaml:"public_read,omitempty" json:"public_read,omitempty"`
	ProtectedNames []string `yaml:"protected_names" json:"protected_names"`
	ProtectedDirs  []string `yaml:"protected_dirs" json:"protected_dirs"`
	Protected      []string `yaml:"protected" json:"protected"`
}

type ruleSpec struct {
	ID          string     `yaml:"id" json:"id"`
	Program     string     `yaml:"program" json:"program"`
	Path        string     `yaml:"path,omitempty" json:"path,omitempty"`
	Subcommands []string   `yaml:"subcommands,omitempty" json:"subcommands,omitempty"`
	Options     []string   `yaml:"options,omitempty" json:"options,omitempty"`
	Exact       []string   `yaml:"exact,omitempty" json:"exact,omitempty"`
	Decision    string     `yaml:"decision" json:"decision"`
	Risk        string     `yaml:"risk" json:"risk"`
	Reason      string     `yaml:"reason" json:"reason"`
	RunAs       string     `yaml:"run_as,omitempty" json:"run_as,omitempty"`
	Match       [][]string `yaml:"match,omitempty" json:"match,omitempty"`
	NotMatch    [][]string `yaml:"not_match,omitempty" json:"not_match,omitempty"`
}

// rule is a validated, compiled rule.
type rule struct {
	ruleSpec
	verdict verdict.Verdict
	risk    verdict.Risk
	subs    map[string]bool
	layer   int // 0 = system, 1 = project (narrowing)
}

// Policy is an immutable, validated policy.
type Policy struct {
	name     string
	spec     fileSpec
	project  *fileSpec // narrowing layer, if any
	mode     verdict.Mode
	limits   decision.Limits
	byProg   map[string][]*rule
	envAllow []string
	envDeny  []string
	childEnv map[string]map[string]string // per tool: its mandatory arguments as environment, for tools that run it
	programs map[string]toolspec.Program  // per program: the tool spec's forced settings and the policy's additions
	version  string
	canon    []byte
}

//go:embed default.yaml
var defaultYAML []byte

var defaultPolicy *Policy

// DefaultYAML returns the embedded default policy text.
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

// Default returns the embedded default policy. It panics only if the
// embedded file is broken (a test proves it loads).
func Default() *Policy {
	if defaultPolicy == nil {
		p, err := Parse("default.yaml", defaultYAML)
		if err != nil {
			panic("policy: embedded default policy is broken: " + err.Error())
		}
		defaultPolicy = p
	}
	return defaultPolicy
}

// LoadFile reads and parses a policy file.
func LoadFile(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return Parse(path, data)
}

// Lint loads a policy file (checking every embedded example) and reports
// the first problem, or nil.
func Lint(path string) error {
	_, err := LoadFile(path)
	return err
}

// LoadError is a policy loading error with file and line.
type LoadError struct {
	File   string
	Line   int
	Reason string
}

func (e *LoadError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Reason)
}

var yamlLineRE = regexp.MustCompile(`line (\d+): (.*)`)

const maxPolicyBytes = 4 << 20

// Parse parses and validates policy text. Errors name file:line: reason.
func Parse(name string, data []byte) (*Policy, error) {
	fs, lines, err := parseSpec(name, data)
	if err != nil {
		return nil, err
	}
	return build(name, fs, nil, lines)
}

// specLines records where things are in the source, for error messages.
type specLines struct {
	root  *yaml.Node
	rules []int
}

func (l *specLines) rule(i int) int {
	if l == nil || i >= len(l.rules) {
		return 0
	}
	return l.rules[i]
}

// key finds the line of a dotted key path, or 0.
func (l *specLines) key(path ...string) int {
	if l == nil || l.root == nil {
		return 0
	}
	n := l.root
	line := 0
	for _, k := range path {
		if n.Kind != yaml.MappingNode {
			return line
		}
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				line = n.Content[i].Line
				n = n.Content[i+1]
				found = true
				break
			}
		}
		if !found {
			return line
		}
	}
	return line
}

func parseSpec(name string, data []byte) (*fileSpec, *specLines, error) {
	if len(data) > maxPolicyBytes {
		return nil, nil, &LoadError{File: name, Reason: "policy file too large"}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, nil, yamlErr(name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, nil, &LoadError{File: name, Line: extra.Line, Reason: "more than one YAML document"}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil, &LoadError{File: name, Line: 1, Reason: "policy must be a YAML mapping"}
	}
	root := doc.Content[0]
	if err := checkKnown(name, root, reflectTypeOf(fileSpec{})); err != nil {
		return nil, nil, err
	}
	var fs fileSpec
	if err := root.Decode(&fs); err != nil {
		return nil, nil, yamlErr(name, err)
	}
	lines := &specLines{root: root}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "rules" && root.Content[i+1].Kind == yaml.SequenceNode {
			for _, it := range root.Content[i+1].Content {
				lines.rules = append(lines.rules, it.Line)
			}
		}
	}
	return &fs, lines, nil
}

func yamlErr(name string, err error) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	msg = strings.TrimSpace(msg)
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		var line int
		fmt.Sscanf(m[1], "%d", &line)
		return &LoadError{File: name, Line: line, Reason: m[2]}
	}
	return &LoadError{File: name, Reason: msg}
}

var ruleIDRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*\*?$`)

func build(name string, fs *fileSpec, project *fileSpec, lines *specLines) (*Policy, error) {
	errAt := func(line int, f string, a ...any) error {
		return &LoadError{File: name, Line: line, Reason: fmt.Sprintf(f, a...)}
	}
	if fs.Version != 1 {
		return nil, errAt(lines.key("version"), "version must be 1, got %d", fs.Version)
	}
	p := &Policy{name: name, spec: *fs, project: project, byProg: map[string][]*rule{}}
	if fs.DefaultMode == "" {
		p.mode = verdict.ModeConfirm
	} else {
		m, err := verdict.ParseMode(fs.DefaultMode)
		if err != nil {
			return nil, errAt(lines.key("default_mode"), "%v", err)
		}
		p.mode = m
	}
	isProject := false
	switch fs.Kind {
	case "", "system":
	case "project":
		isProject = true
	default:
		return nil, errAt(lines.key("kind"), "kind must be system or project, got %q", fs.Kind)
	}
	switch fs.SandboxedWorkspaceWrites {
	case "", SandboxedWritesAllow, SandboxedWritesAsk:
	default:
		return nil, errAt(lines.key("sandboxed_workspace_writes"), "sandboxed_workspace_writes must be %s or %s, got %q", SandboxedWritesAllow, SandboxedWritesAsk, fs.SandboxedWorkspaceWrites)
	}
	if len(fs.TrustedPath) == 0 && !isProject {
		return nil, errAt(lines.key("trusted_path"), "trusted_path must list at least one directory")
	}
	seenDir := map[string]bool{}
	for _, d := range fs.TrustedPath {
		if !filepath.IsAbs(d) || filepath.Clean(d) != d || strings.ContainsAny(d, ":\x00") {
			return nil, errAt(lines.key("trusted_path"), "trusted_path entry %q must be a clean absolute directory", d)
		}
		if seenDir[d] {
			return nil, errAt(lines.key("trusted_path"), "duplicate trusted_path entry %q", d)
		}
		seenDir[d] = true
	}
	var err error
	lim := decision.Limits{OutputBytes: fs.Limits.OutputBytes, OutputBudget: fs.Limits.OutputBudget, MemoryBytes: fs.Limits.MemoryBytes, Pids: fs.Limits.Pids}
	if lim.OutputBudget < 0 {
		return nil, errAt(lines.key("limits", "output_budget"), "limits.output_budget must be positive (bytes a command may write in all), got %d", lim.OutputBudget)
	}
	if lim.OutputBudget == 0 && !isProject {
		lim.OutputBudget = decision.DefaultOutputBudget
	}
	durs := []struct {
		key string
		val string
		dst *time.Duration
	}{{"default_timeout", fs.Limits.DefaultTimeout, &lim.DefaultTimeout}, {"max_timeout", fs.Limits.MaxTimeout, &lim.MaxTimeout}, {"grace", fs.Limits.Grace, &lim.Grace}}
	for _, d := range durs {
		if isProject && d.val == "" {
			continue
		}
		*d.dst, err = time.ParseDuration(d.val)
		if err != nil || *d.dst <= 0 {
			return nil, errAt(lines.key("limits", d.key), "limits.%s: want a positive duration like 30s, got %q", d.key, d.val)
		}
	}
	if lim.DefaultTimeout > lim.MaxTimeout && lim.MaxTimeout > 0 {
		return nil, errAt(lines.key("limits", "default_timeout"), "limits.default_timeout exceeds limits.max_timeout")
	}
	if !isProject && (lim.OutputBytes <= 0 || lim.MemoryBytes <= 0 || lim.Pids <= 0) || lim.OutputBytes < 0 || lim.MemoryBytes < 0 || lim.Pids < 0 {
		return nil, errAt(lines.key("limits"), "limits.output_bytes, memory_bytes and pids must be positive")
	}
	p.limits = lim
	for _, e := range fs.Env.Allow {
		if !envNameRE.MatchString(e) {
			return nil, errAt(lines.key("env", "allow"), "env.allow entry %q is not a variable name (optionally ending in *)", e)
		}
		for _, d := range fs.Env.Deny {
			if envPatternMatch(d, strings.TrimSuffix(e, "*")) && !strings.HasSuffix(e, "*") {
				return nil, errAt(lines.key("env", "allow"), "env.allow entry %q is also denied by %q", e, d)
			}
		}
	}
	for _, e := range fs.Env.Deny {
		if e == "" || strings.ContainsAny(e, "=\x00") {
			return nil, errAt(lines.key("env", "deny"), "bad env.deny pattern %q", e)
		}
	}
	p.envAllow = append([]string(nil), fs.Env.Allow...)
	p.envDeny = append([]string(nil), fs.Env.Deny...)
	p.programs = toolspec.EffectivePrograms(fs.Programs)
	p.childEnv = map[string]map[string]string{}
	for name, t := range toolspec.Tools() {
		if t.ChildEnv != nil {
			p.childEnv[name] = t.ChildEnv(p.programs[name].ExecArgs)
		}
	}
	if err := checkPathsAndPrograms(fs, lines, errAt); err != nil {
		return nil, err
	}
	if err := p.addRules(name, fs.Rules, 0, lines); err != nil {
		return nil, err
	}
	if project != nil {
		if err := p.addRules(name, project.Rules, 1, nil); err != nil {
			return nil, err
		}
	}
	p.canon = canonicalText(p)
	sum := sha256.Sum256(p.canon)
	p.version = "sha256:" + hex.EncodeToString(sum[:])
	return p, nil
}

// checkPathsAndPrograms checks the paths and programs sections of a policy
// file: patterns absolute or under ~/, public reads beneath the system read
// set, protected names single components, programs' names, variables and
// sandbox paths well formed.
func checkPathsAndPrograms(fs *fileSpec, lines *specLines, errAt func(line int, f string, a ...any) error) error {
	for _, list := range [][]string{fs.Paths.SensitiveRead, fs.Paths.SystemRead, fs.Paths.PublicRead, fs.Paths.Protected} {
		for _, s := range list {
			if !(filepath.IsAbs(s) || strings.HasPrefix(s, "~/")) {
				return errAt(lines.key("paths"), "path pattern %q must be absolute or start with ~/", s)
			}
		}
	}
	for _, pub := range fs.Paths.PublicRead {
		if !slices.ContainsFunc(fs.Paths.SystemRead, func(sr string) bool { return toolspec.MatchPrefix(sr, pub) }) {
			return errAt(lines.key("paths", "public_read"), "paths.public_read entry %q is not beneath paths.system_read (the sandbox would not let a command read it); add it there too", pub)
		}
	}
	for _, list := range [][]string{fs.Paths.ProtectedNames, fs.Paths.ProtectedDirs} {
		for _, s := range list {
			if s == "" || strings.Contains(s, "/") {
				return errAt(lines.key("paths"), "protected name %q must be a single path component", s)
			}
		}
	}
	for prog, ps := range fs.Programs {
		if !isPlainProgramName(prog) {
			return errAt(lines.key("programs", prog), "programs key %q must be a plain program name", prog)
		}
		for k := range ps.ExecEnv {
			if !envNameRE.MatchString(k) || strings.HasSuffix(k, "*") {
				return errAt(lines.key("programs", prog), "programs.%s.exec_env: bad name %q", prog, k)
			}
		}
		for _, x := range ps.SandboxExec {
			if rest, ok := strings.CutPrefix(x, "$PROGDIR/"); (!ok && !filepath.IsAbs(x)) || (ok && rest == "") || strings.Contains(x, "..") && !ok {
				return errAt(lines.key("programs", prog), "programs.%s.sandbox_exec: %q must be an absolute path or $PROGDIR/… (the resolved program's directory)", prog, x)
			}
		}
		for _, x := range ps.SandboxCache {
			if rest, ok := strings.CutPrefix(x, "~/"); !ok || rest == "" || strings.Contains(rest, "..") {
				return errAt(lines.key("programs", prog), "programs.%s.sandbox_cache: %q must be a directory under the private HOME, written ~/…", prog, x)
			}
		}
	}
	return nil
}

func isPlainProgramName(s string) bool {
	if s == "" || len(s) > 128 || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' || r == '+') {
			return false
		}
	}
	return true
}

func (p *Policy) addRules(name string, specs []ruleSpec, layer int, lines *specLines) error {
	seenID := map[string]int{}
	seenSel := map[string]string{}
	for _, rs := range p.allRules() {
		seenID[rs.ID] = 1
		if rs.layer == layer {
			seenSel[selectorKey(&rs.ruleSpec)] = rs.ID
		}
	}
	for i := range specs {
		rs := specs[i]
		line := lines.rule(i)
		errAt := func(f string, a ...any) error {
			prefix := ""
			if rs.ID != "" {
				prefix = "rule " + rs.ID + ": "
			}
			return &LoadError{File: name, Line: line, Reason: prefix + fmt.Sprintf(f, a...)}
		}
		if !ruleIDRE.MatchString(rs.ID) {
			return errAt("rule id %q must match %s", rs.ID, ruleIDRE)
		}
		if _, dup := seenID[rs.ID]; dup {
			return errAt("duplicate rule id %q", rs.ID)
		}
		seenID[rs.ID] = 1
		if len(rs.Exact) > 0 {
			if rs.Program == "" {
				rs.Program = filepath.Base(rs.Exact[0])
			}
			if filepath.Base(rs.Exact[0]) != rs.Program {
				return errAt("exact argv must start with the rule's program %q", rs.Program)
			}
			if len(rs.Subcommands) > 0 || len(rs.Options) > 0 {
				return errAt("exact cannot be combined with subcommands or options")
			}
		}
		if !isPlainProgramName(rs.Program) {
			return errAt("program %q must be a plain program name (pin a path with `path:`)", rs.Program)
		}
		if rs.Path != "" && (!filepath.IsAbs(rs.Path) || filepath.Clean(rs.Path) != rs.Path || filepath.Base(rs.Path) != rs.Program) {
			return errAt("path %q must be a clean absolute path whose base name is %q", rs.Path, rs.Program)
		}
		v, ok := verdict.ParseVerdict(rs.Decision)
		if !ok {
			return errAt("decision must be allow, ask or deny, got %q", rs.Decision)
		}
		rk, ok := verdict.ParseRisk(rs.Risk)
		if !ok {
			return errAt("risk must be low, medium, high or critical, got %q", rs.Risk)
		}
		if strings.TrimSpace(rs.Reason) == "" {
			return errAt("reason is required")
		}
		if rs.RunAs != "" && !isPlainProgramName(rs.RunAs) {
			return errAt("run_as %q is not a user name", rs.RunAs)
		}
		r := &rule{ruleSpec: rs, verdict: v, risk: rk, layer: layer}
		if len(rs.Subcommands) > 0 {
			r.subs = map[string]bool{}
			for _, s := range rs.Subcommands {
				if r.subs[s] {
					return errAt("duplicate subcommand %q", s)
				}
				r.subs[s] = true
			}
		}
		key := selectorKey(&rs)
		if other, dup := seenSel[key]; dup {
			return errAt("duplicate rule: same program, path, subcommands, options and exact argv as rule %q", other)
		}
		seenSel[key] = rs.ID
		for _, ex := range rs.Match {
			if len(ex) == 0 || filepath.Base(ex[0]) != rs.Program {
				return errAt("match example %q must start with %q", ex, rs.Program)
			}
			if ok, why := r.matches(ex); !ok {
				return errAt("match example %q does not match: %s", ex, why)
			}
		}
		for _, ex := range rs.NotMatch {
			if len(ex) == 0 {
				return errAt("empty not_match example")
			}
			if ok, _ := r.matches(ex); ok {
				return errAt("not_match example %q matches", ex)
			}
		}
		p.byProg[rs.Program] = append(p.byProg[rs.Program], r)
	}
	return nil
}

func selectorKey(rs *ruleSpec) string {
	subs := append([]string(nil), rs.Subcommands...)
	sort.Strings(subs)
	opts := append([]string(nil), rs.Options...)
	sort.Strings(opts)
	return strings.Join([]string{rs.Program, rs.Path, strings.Join(subs, "\x01"), strings.Join(opts, "\x01"), strings.Join(rs.Exact, "\x01")}, "\x00")
}

func (p *Policy) allRules() []*rule {
	var out []*rule
	progs := make([]string, 0, len(p.byProg))
	for k := range p.byProg {
		progs = append(progs, k)
	}
	sort.Strings(progs)
	for _, k := range progs {
		out = append(out, p.byProg[k]...)
	}
	return out
}

// Version is "sha256:<hex>" over the canonical form.
func (p *Policy) Version() string { return p.version }

// Name is the file name the policy was loaded from.
func (p *Policy) Name() string { return p.name }

// Limits returns the execution limits.
func (p *Policy) Limits() decision.Limits { return p.limits }

// TrustedPath returns the directories argv[0] is resolved against.
func (p *Policy) TrustedPath() []string { return append([]string(nil), p.spec.TrustedPath...) }

// EnvAllowlist returns the variable names (a trailing * is a prefix) the
// child may inherit or receive.
func (p *Policy) EnvAllowlist() []string { return append([]string(nil), p.envAllow...) }

// NetworkAllowed reports whether commands may use the network at all.
func (p *Policy) NetworkAllowed() bool {
	return p.spec.Network && (p.project == nil || p.project.Network)
}

// The values of the policy setting sandboxed_workspace_writes.
const (
	SandboxedWritesAllow = "allow"
	SandboxedWritesAsk   = "ask"
)

// SandboxedWorkspaceWrites is what confirm mode does with a plain write
// inside the workspace (sed -i, mkdir, mv, git commit) that will run under a
// fully enforced sandbox: allow (the default) runs it without approval, ask
// asks as for any write. A project policy can only turn it to ask.
func (p *Policy) SandboxedWorkspaceWrites() string {
	if p.spec.SandboxedWorkspaceWrites == SandboxedWritesAsk || (p.project != nil && p.project.SandboxedWorkspaceWrites == SandboxedWritesAsk) {
		return SandboxedWritesAsk
	}
	return SandboxedWritesAllow
}

// DefaultMode is the mode used when a request names none.
func (p *Policy) DefaultMode() verdict.Mode { return p.mode }

// Canonical returns the canonical text of the policy (`policy show`).
func (p *Policy) Canonical() []byte { return append([]byte(nil), p.canon...) }

func canonicalText(p *Policy) []byte {
	type canon struct {
		System  *fileSpec `yaml:"system"`
		Project *fileSpec `yaml:"project,omitempty"`
	}
	c := canon{System: normSpec(&p.spec), Project: normSpec(p.project)}
	// What programs run with: the tool specs' and the policy's together.
	c.System.Programs = p.programs
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return []byte(fmt.Sprintf("error: %v", err))
	}
	enc.Close()
	return buf.Bytes()
}

func normSpec(fs *fileSpec) *fileSpec {
	if fs == nil {
		return nil
	}
	c := *fs
	c.Rules = append([]ruleSpec(nil), fs.Rules...)
	sort.SliceStable(c.Rules, func(i, j int) bool { return c.Rules[i].ID < c.Rules[j].ID })
	return &c
}

// Narrow returns a policy that applies project on top of p. A project
// policy may only narrow: it may not allow anything, add trusted PATH
// directories or environment names, raise limits, turn network on, or
// pick a more permissive default mode.
func (p *Policy) Narrow(project *Policy) (*Policy, error) {
	if project == nil {
		return p, nil
	}
	if p.project != nil {
		return nil, errors.New("policy is already narrowed by a project policy")
	}
	ps := project.spec
	name := project.name
	fail := func(f string, a ...any) (*Policy, error) {
		return nil, &LoadError{File: name, Reason: "project policy may only narrow: " + fmt.Sprintf(f, a...)}
	}
	if ps.Network && !p.spec.Network {
		return fail("network: true widens a system policy without network")
	}
	if ps.SandboxedWorkspaceWrites == SandboxedWritesAllow && p.SandboxedWorkspaceWrites() == SandboxedWritesAsk {
		return fail("sandboxed_workspace_writes: allow widens a system policy that asks")
	}
	for _, d := range ps.TrustedPath {
		if !grammar.Contains(p.spec.TrustedPath, d) {
			return fail("trusted_path adds %q", d)
		}
	}
	for _, e := range ps.Env.Allow {
		if !grammar.Contains(p.envAllow, e) {
			return fail("env.allow adds %q", e)
		}
	}
	pm := project.mode
	if ps.DefaultMode == "" {
		pm = p.mode
	}
	if verdict.ModeRank(pm) > verdict.ModeRank(p.mode) {
		return fail("default_mode %s is more permissive than %s", pm, p.mode)
	}
	pl, sl := project.limits, p.limits
	if pl.MaxTimeout > sl.MaxTimeout || pl.DefaultTimeout > sl.DefaultTimeout || pl.OutputBytes > sl.OutputBytes || pl.OutputBudget > sl.OutputBudget || pl.MemoryBytes > sl.MemoryBytes || pl.Pids > sl.Pids || pl.Grace > sl.Grace {
		return fail("limits exceed the system limits")
	}
	if ps.Kind != "project" && len(ps.TrustedPath) == 0 {
		return fail("not a project policy")
	}
	if len(ps.Programs) > 0 {
		return fail("programs (mandatory exec env/args) can only be set by the system policy")
	}
	for _, r := range ps.Rules {
		if r.Decision == string(verdict.Allow) {
			return fail("rule %s allows (a widening rule is refused; use ask or deny)", r.ID)
		}
		if len(r.Exact) > 0 && r.Decision != string(verdict.Deny) {
			return fail("rule %s names an exact escape form (only deny is allowed)", r.ID)
		}
		if r.RunAs != "" {
			return fail("rule %s sets run_as", r.ID)
		}
	}
	merged := p.spec
	// Narrowing never relaxes: take the stricter of each setting.
	merged.TrustedPath = intersect(p.spec.TrustedPath, ps.TrustedPath)
	merged.Env.Allow = intersect(p.envAllow, ps.Env.Allow)
	merged.Env.Deny = union(p.envDeny, ps.Env.Deny)
	merged.Network = p.spec.Network && ps.Network
	merged.Paths.SensitiveRead = union(p.spec.Paths.SensitiveRead, ps.Paths.SensitiveRead)
	merged.Paths.SystemRead = intersect(p.spec.Paths.SystemRead, ps.Paths.SystemRead)
	merged.Paths.PublicRead = intersect(p.spec.Paths.PublicRead, ps.Paths.PublicRead)
	merged.Paths.Protected = union(p.spec.Paths.Protected, ps.Paths.Protected)
	merged.Paths.ProtectedNames = union(p.spec.Paths.ProtectedNames, ps.Paths.ProtectedNames)
	merged.Paths.ProtectedDirs = union(p.spec.Paths.ProtectedDirs, ps.Paths.ProtectedDirs)
	merged.DefaultMode = string(pm)
	ml := p.spec.Limits
	if ps.Limits.DefaultTimeout != "" {
		ml.DefaultTimeout = ps.Limits.DefaultTimeout
	}
	if ps.Limits.MaxTimeout != "" {
		ml.MaxTimeout = ps.Limits.MaxTimeout
	}
	if ps.Limits.Grace != "" {
		ml.Grace = ps.Limits.Grace
	}
	if ps.Limits.OutputBytes > 0 {
		ml.OutputBytes = ps.Limits.OutputBytes
	}
	if ps.Limits.OutputBudget > 0 {
		ml.OutputBudget = ps.Limits.OutputBudget
	}
	if ps.Limits.MemoryBytes > 0 {
		ml.MemoryBytes = ps.Limits.MemoryBytes
	}
	if ps.Limits.Pids > 0 {
		ml.Pids = ps.Limits.Pids
	}
	merged.Limits = ml
	merged.Rules = p.spec.Rules
	proj := ps
	return build(p.name+"+"+name, &merged, &proj, nil)
}

// intersect keeps the entries of a that are in b (b empty = keep a).
func intersect(a, b []string) []string {
	if len(b) == 0 {
		return append([]string(nil), a...)
	}
	var out []string
	for _, x := range a {
		if grammar.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func union(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, x := range b {
		if !grammar.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
