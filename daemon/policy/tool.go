package policy

import (
	"strings"
	"sync"
)

// A tool's policy knowledge lives in its spec, in the file of its family
// (tool_git.go, tool_go.go, ...): the grammar that reads its argv and the
// hooks for what a grammar cannot say — files it reads by fixed names,
// checks that look at the file system, the project files it runs, the
// arguments and environment it is forced to run with and what it needs in
// the sandbox. The engine (decide.go) asks the registry; it names no tool.
// Whether a command is allowed, asked or denied, and at which risk, is data
// in the policy file (rules:); a policy's programs: section may only add to
// what a spec forces (programs.go).
type toolSpec struct {
	// grammar reads argv[1:].
	grammar *cmdSpec
	// preparse rewrites the arguments before the grammar reads them (tar's
	// old-style "xzf" bundle).
	preparse func(grammar *cmdSpec, args []string) []string

	// chdir is the tool's own option that changes directory, each in turn,
	// before anything else (git -C): operands and path options are
	// relative to where the tool ends up.
	chdir string
	// namesOnly: the tool reads only names and metadata of a directory
	// operand, never the files in it (a directory holding a secret is an
	// ordinary system read for ls).
	namesOnly bool
	// removes: the tool's write operands are removed or renamed (rm, mv):
	// a workspace root is never one.
	removes bool
	// writesNoContent: the tool's writes put no new content in a file (rm,
	// chmod, mv), so a setuid file may be one.
	writesNoContent bool

	// entry: the project files the tool reads as code or build
	// configuration, bound into the request hash when it runs project code.
	entry *entryFiles
	// fixedReads: files the tool reads by fixed names next to where it
	// works and may echo in errors (git's HEAD, packed-refs, alternates).
	fixedReads func(c *toolCall) []string
	// derivedReads: files its arguments name together (diff DIR FILE reads
	// DIR/FILE).
	derivedReads func(c *toolCall) []string
	// envReads: files named by request environment variables this tool
	// family obeys whichever program runs (GOWORK for a go run by make).
	envReads func(env map[string]string) []string
	// check: checks that need the file system or the tool's semantics,
	// after the paths are checked; findings go through c.deny.
	check func(c *toolCall)

	// runs: tools this one runs as child processes (go runs git); they
	// get the environment form of their forced arguments (childEnv).
	runs []string
	// childEnv turns the tool's mandatory arguments (execArgs and the
	// policy's additions) into environment a parent tool passes down
	// (git's -c as GIT_CONFIG_*).
	childEnv func(execArgs []string) map[string]string

	// execArgs: arguments every command of the tool runs with, put right
	// after argv[0], in groups (an option and its value: "-c", "k=v"); a
	// policy's programs.<tool>.exec_args that repeat a group are not added
	// twice.
	execArgs [][]string
	// execEnv: environment every command of the tool runs with.
	execEnv map[string]string
	// sandboxExec: absolute paths (files or directories; "$PROGDIR/..." is
	// relative to the resolved program's directory) the tool runs itself,
	// which a read-only sandbox must let it execute (git's git-core).
	sandboxExec []string
	// sandboxCache: directories under the private HOME ("~/...") the tool
	// keeps its cache in, writable even in a read-only sandbox.
	sandboxCache []string
	// forced adds the arguments and environment that depend on the command
	// (c.addOption, c.setEnv): git diff's --no-ext-diff.
	forced func(c *toolCall)
}

// entryFiles are a tool's project entry files (see projectEntryPaths).
type entryFiles struct {
	names []string
	// walksUp: the tool looks for them in the parent directories too, up to
	// the workspace root.
	walksUp bool
	// chdir: the tool's option that changes directory, in turn, before it
	// reads anything (make -C).
	chdir string
	// dirs: more directories with their own entry files (npm -w members).
	dirs func(pc *parsed, dir string) []string
	// extra: entry files named by options or by other entry files (make -f,
	// npm workspaces), given the files found so far.
	extra func(pc *parsed, dir, cwd string, found []string) []string
}

// Reasons several tools' grammars give for refusing an option.
const (
	whyExec      = "runs a command (hidden execution)"
	whyPager     = "runs a pager program"
	whyConfig    = "sets configuration that can run programs"
	whyUnchecked = "reads a program text that cannot be checked"
)

// toolCall is one command as the tool hooks see it. Hooks report through it
// (deny, setEnv, addOption) and the engine applies what they reported, so a
// hook holds nothing of the decision itself.
type toolCall struct {
	pc      *parsed
	cwd     string
	ctx     *decideCtx
	entries []string // the entry files found for it

	denials  []finding
	execArgv []string
	execEnv  map[string]string
}

func (c *toolCall) deny(r Risk, reason string) {
	c.denials = append(c.denials, finding{Deny, r, reason})
}

// setEnv forces a variable into the child's environment.
func (c *toolCall) setEnv(k, v string) {
	if c.execEnv == nil {
		c.execEnv = map[string]string{}
	}
	c.execEnv[k] = v
}

// addOption forces an option where the command still reads options.
func (c *toolCall) addOption(opt string) { c.execArgv = withOption(c.execArgv, opt) }

// workDir is where a tool works after its chdir options, applied in order.
func (t *toolSpec) workDir(pc *parsed, cwd string) string {
	if t == nil || t.chdir == "" {
		return cwd
	}
	dir, c := cwd, t.grammar.optIndex[t.chdir]
	for _, u := range pc.opts {
		if u.opt == c && u.value != "" {
			dir = resolvePath(dir, u.value)
		}
	}
	return dir
}

// The registry, built on first use rather than in init: termctl links the
// engine only for `policy lint`, and `termctl status` must not pay for the
// tables on every start.
var (
	toolTable    = map[string]*toolSpec{}
	envReadHooks []func(map[string]string) []string
	toolsOnce    sync.Once
)

func tools() map[string]*toolSpec {
	toolsOnce.Do(registerTools)
	return toolTable
}

// envReads lists the files the request's environment names for tools that
// read them whichever program runs.
func envReads(env map[string]string) []string {
	tools()
	var out []string
	for _, h := range envReadHooks {
		out = append(out, h(env)...)
	}
	return out
}

// toolNamed is the spec of a program base name, or nil.
func toolNamed(name string) *toolSpec { return tools()[name] }

// families are the register functions of the tool spec files, each of
// which adds its own (var _ = family(registerX)), so that adding a tool is
// one file. They run on first use (tools), not at init.
var families []func()

func family(register func()) bool {
	families = append(families, register)
	return true
}

// register adds a tool under each of its '|'-separated names.
func register(names string, t *toolSpec) {
	for _, n := range strings.Split(names, "|") {
		if toolTable[n] != nil {
			panic("policy: tool " + n + " is registered twice")
		}
		tt := *t
		if t.grammar != nil {
			g := *t.grammar
			g.name = n
			tt.grammar = &g
		}
		toolTable[n] = &tt
	}
	if t.grammar != nil {
		t.grammar.name = strings.Split(names, "|")[0]
	}
	if t.envReads != nil {
		envReadHooks = append(envReadHooks, t.envReads)
	}
}

// reg registers a tool that is only a grammar.
func reg(names string, c *cmdSpec) { register(names, &toolSpec{grammar: c}) }

func registerTools() {
	for _, f := range families {
		f()
	}
	for _, t := range toolTable {
		if t.grammar != nil {
			t.grammar.index()
		}
	}
	if len(dupOpts) > 0 {
		panic("policy: duplicate options: " + strings.Join(dupOpts, " "))
	}
}

// parseCommand parses argv (argv[0] is the program base name) with the
// tool grammar. ok=false when the tool has no grammar.
func parseCommand(argv []string) (*parsed, bool, error) {
	if len(argv) == 0 {
		return nil, false, errf("empty argv")
	}
	tool := baseName(argv[0])
	t := toolNamed(tool)
	if t == nil || t.grammar == nil {
		return &parsed{tool: tool, unparsed: true}, false, nil
	}
	args := argv[1:]
	if t.preparse != nil {
		args = t.preparse(t.grammar, args)
	}
	p, err := parseArgs(tool, t.grammar, args)
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
