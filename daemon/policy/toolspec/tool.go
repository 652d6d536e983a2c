// Package toolspec is the registry of tool specs and what their hooks see:
// a ToolSpec (grammar, fixed reads, checks, forced arguments, environment
// and sandbox needs), the ToolCall a hook reports through, the decision's
// context (workspaces, protected paths), path resolution and project entry
// files, and which programs are shells, interpreters or wrappers (escape
// classes). It imports grammar and verdict; the tool families import it
// and register with Family; the engine (package policy) asks it, naming no
// tool.
package toolspec

import (
	"strings"
	"sync"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/verdict"
)

// ToolSpec is a tool's policy knowledge, in the file of its family
// (unixtools/tool_text.go, devtools/tool_git.go, ...): the grammar that
// reads its argv and the hooks for what a grammar cannot say — files it
// reads by fixed names, checks that look at the file system, the project
// files it runs, the arguments and environment it is forced to run with and
// what it needs in the sandbox. The engine (daemon/policy/decide.go) asks
// the registry; it names no tool. Whether a command is allowed, asked or
// denied, and at which risk, is data in the policy file (rules:); a
// policy's programs: section may only add to what a spec forces
// (programs.go).
type ToolSpec struct {
	// Grammar reads argv[1:].
	Grammar *grammar.CmdSpec
	// Preparse rewrites the arguments before the grammar reads them (tar's
	// old-style "xzf" bundle).
	Preparse func(grammar *grammar.CmdSpec, args []string) []string

	// Chdir is the tool's own option that changes directory, each in turn,
	// before anything else (git -C): operands and path options are
	// relative to where the tool ends up.
	Chdir string
	// NamesOnly: the tool reads only names and metadata of a directory
	// operand, never the files in it (a directory holding a secret is an
	// ordinary system read for ls).
	NamesOnly bool
	// Removes: the tool's write operands are removed or renamed (rm, mv):
	// a workspace root is never one.
	Removes bool
	// WritesNoContent: the tool's writes put no new content in a file (rm,
	// chmod, mv), so a setuid file may be one.
	WritesNoContent bool

	// Entry: the project files the tool reads as code or build
	// configuration, bound into the request hash when it runs project code.
	Entry *EntryFiles
	// FixedReads: files the tool reads by fixed names next to where it
	// works and may echo in errors (git's HEAD, packed-refs, alternates).
	FixedReads func(c *ToolCall) []string
	// DerivedReads: files its arguments name together (diff DIR FILE reads
	// DIR/FILE).
	DerivedReads func(c *ToolCall) []string
	// EnvReads: files named by request environment variables this tool
	// family obeys whichever program runs (GOWORK for a go run by make).
	EnvReads func(env map[string]string) []string
	// Check: checks that need the file system or the tool's semantics,
	// after the paths are checked; findings go through c.deny.
	Check func(c *ToolCall)

	// Runs: tools this one runs as child processes (go runs git); they
	// get the environment form of their forced arguments (childEnv).
	Runs []string
	// ChildEnv turns the tool's mandatory arguments (execArgs and the
	// policy's additions) into environment a parent tool passes down
	// (git's -c as GIT_CONFIG_*).
	ChildEnv func(execArgs []string) map[string]string

	// ExecArgs: arguments every command of the tool runs with, put right
	// after argv[0], in groups (an option and its value: "-c", "k=v"); a
	// policy's programs.<tool>.exec_args that repeat a group are not added
	// twice.
	ExecArgs [][]string
	// ExecEnv: environment every command of the tool runs with.
	ExecEnv map[string]string
	// SandboxExec: absolute paths (files or directories; "$PROGDIR/..." is
	// relative to the resolved program's directory) the tool runs itself,
	// which a read-only sandbox must let it execute (git's git-core).
	SandboxExec []string
	// SandboxCache: directories under the private HOME ("~/...") the tool
	// keeps its cache in, writable even in a read-only sandbox.
	SandboxCache []string
	// Forced adds the arguments and environment that depend on the command
	// (c.addOption, c.setEnv): git diff's --no-ext-diff.
	Forced func(c *ToolCall)
}

// EntryFiles are a tool's project entry files (see projectEntryPaths).
type EntryFiles struct {
	Names []string
	// WalksUp: the tool looks for them in the parent directories too, up to
	// the workspace root.
	WalksUp bool
	// Chdir: the tool's option that changes directory, in turn, before it
	// reads anything (make -C).
	Chdir string
	// Dirs: more directories with their own entry files (npm -w members).
	Dirs func(pc *grammar.Parsed, dir string) []string
	// Extra: entry files named by options or by other entry files (make -f,
	// npm workspaces), given the files found so far.
	Extra func(pc *grammar.Parsed, dir, cwd string, found []string) []string
}

// Reasons several tools' grammars give for refusing an option.
const (
	WhyExec      = "runs a command (hidden execution)"
	WhyPager     = "runs a pager program"
	WhyConfig    = "sets configuration that can run programs"
	WhyUnchecked = "reads a program text that cannot be checked"
)

// ToolCall is one command as the tool hooks see it. Hooks report through it
// (deny, setEnv, addOption) and the engine applies what they reported, so a
// hook holds nothing of the decision itself.
type ToolCall struct {
	Pc      *grammar.Parsed
	Cwd     string
	Ctx     *DecideCtx
	Entries []string // the entry files found for it

	Denials  []grammar.Finding
	ExecArgv []string
	ExecEnv  map[string]string
}

func (c *ToolCall) Deny(r verdict.Risk, reason string) {
	c.Denials = append(c.Denials, grammar.Finding{Verdict: verdict.Deny, Risk: r, Reason: reason})
}

// SetEnv forces a variable into the child's environment.
func (c *ToolCall) SetEnv(k, v string) {
	if c.ExecEnv == nil {
		c.ExecEnv = map[string]string{}
	}
	c.ExecEnv[k] = v
}

// AddOption forces an option where the command still reads options.
func (c *ToolCall) AddOption(opt string) { c.ExecArgv = withOption(c.ExecArgv, opt) }

// WorkDir is where a tool works after its chdir options, applied in order.
func (t *ToolSpec) WorkDir(pc *grammar.Parsed, cwd string) string {
	if t == nil || t.Chdir == "" {
		return cwd
	}
	dir, c := cwd, t.Grammar.OptIndex[t.Chdir]
	for _, u := range pc.Opts {
		if u.Opt == c && u.Value != "" {
			dir = ResolvePath(dir, u.Value)
		}
	}
	return dir
}

// The registry, built on first use rather than in init: termctl links the
// engine only for `policy lint`, and `termctl status` must not pay for the
// tables on every start.
var (
	toolTable    = map[string]*ToolSpec{}
	envReadHooks []func(map[string]string) []string
	toolsOnce    sync.Once
)

func Tools() map[string]*ToolSpec {
	toolsOnce.Do(registerTools)
	return toolTable
}

// EnvReads lists the files the request's environment names for tools that
// read them whichever program runs.
func EnvReads(env map[string]string) []string {
	Tools()
	var out []string
	for _, h := range envReadHooks {
		out = append(out, h(env)...)
	}
	return out
}

// ToolNamed is the spec of a program base name, or nil.
func ToolNamed(name string) *ToolSpec { return Tools()[name] }

// families are the register functions of the tool spec files, each of
// which adds its own (var _ = family(registerX)), so that adding a tool is
// one file. They run on first use (tools), not at init.
var families []func()

func Family(register func()) bool {
	families = append(families, register)
	return true
}

// Register adds a tool under each of its '|'-separated names.
func Register(names string, t *ToolSpec) {
	for _, n := range strings.Split(names, "|") {
		if toolTable[n] != nil {
			panic("policy: tool " + n + " is registered twice")
		}
		tt := *t
		if t.Grammar != nil {
			g := *t.Grammar
			g.Name = n
			tt.Grammar = &g
		}
		toolTable[n] = &tt
	}
	if t.Grammar != nil {
		t.Grammar.Name = strings.Split(names, "|")[0]
	}
	if t.EnvReads != nil {
		envReadHooks = append(envReadHooks, t.EnvReads)
	}
}

// Reg registers a tool that is only a grammar.
func Reg(names string, c *grammar.CmdSpec) { Register(names, &ToolSpec{Grammar: c}) }

func registerTools() {
	for _, f := range families {
		f()
	}
	for _, t := range toolTable {
		if t.Grammar != nil {
			t.Grammar.Index()
		}
	}
	if len(grammar.DupOpts) > 0 {
		panic("policy: duplicate options: " + strings.Join(grammar.DupOpts, " "))
	}
}

// ParseCommand parses argv (argv[0] is the program base name) with the
// tool grammar. ok=false when the tool has no grammar.
func ParseCommand(argv []string) (*grammar.Parsed, bool, error) {
	if len(argv) == 0 {
		return nil, false, grammar.Errf("empty argv")
	}
	tool := grammar.BaseName(argv[0])
	t := ToolNamed(tool)
	if t == nil || t.Grammar == nil {
		return &grammar.Parsed{Tool: tool, Unparsed: true}, false, nil
	}
	args := argv[1:]
	if t.Preparse != nil {
		args = t.Preparse(t.Grammar, args)
	}
	p, err := grammar.ParseArgs(tool, t.Grammar, args)
	return p, true, err
}

// withOption adds opt to an argv where the command still reads options:
// before a "--", else at the end.
func withOption(argv []string, opt string) []string {
	at := len(argv)
	for i, a := range argv {
		if a == "--" {
			at = i
			break
		}
	}
	return append(argv[:at:at], append([]string{opt}, argv[at:]...)...)
}
