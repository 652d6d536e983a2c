package policy

import (
	"fmt"
	"strings"
)

// Kind is what an operand or option value is.
type Kind uint8

const (
	KOther Kind = iota
	KPathRead
	KPathWrite
	KURL
	KPattern
)

func (k Kind) String() string {
	switch k {
	case KPathRead:
		return "path-read"
	case KPathWrite:
		return "path-write"
	case KURL:
		return "url"
	case KPattern:
		return "pattern"
	}
	return "other"
}

type argMode uint8

const (
	noArg argMode = iota
	reqArg
	optArg // only attached: -xVAL or --x=VAL
)

// opt describes one option. Names: "-x" short, "--long" GNU long, or for
// single-dash long tools ("go", "find") "-name".
type opt struct {
	names []string
	arg   argMode
	kind  Kind
	deny  string // non-empty: the option is denied with this reason
	write bool   // presence makes the command write
	code  bool   // presence runs project code
	// workDir: the value is a directory the tool works in (-C, --git-dir),
	// which a command that writes or builds writes in.
	workDir bool
	// notPlain: presence makes a plain write (cmdSpec.plainWrite) more
	// than an edit a sandbox makes safe, with this reason (git commit
	// --amend rewrites history).
	notPlain string
	// tty: the denial holds only without a terminal (onTerminal).
	tty bool
}

// cmdSpec is the grammar of a tool or subcommand.
type cmdSpec struct {
	name    string
	opts    []*opt
	subs    map[string]*cmdSpec
	aliases map[string]string // subcommand alias -> canonical
	// needSub: a subcommand is required (unknown operand = unknown subcommand).
	needSub bool
	// inherit parent options (npm-style options anywhere).
	inherit bool
	// longSingleDash: "-name" is a long option (go). Short bundling is off.
	longSingleDash bool
	// posix: options end at the first operand.
	posix bool
	// numFlag: "-5" means "-n 5" (head, tail).
	numFlag string
	// operand kinds
	operand  Kind
	first    Kind // kind of the first operand (when hasFirst)
	hasFirst bool
	last     Kind // kind of the last operand when there are >= 2 (when hasLast)
	hasLast  bool
	// free: every argument is data (echo, printf).
	free bool
	// operandLike: an argument starting with '-' that is really an operand
	// (chmod -x FILE).
	operandLike func(string) bool
	// restMarker: everything after this option is an operand (go test -args).
	restMarker string
	// custom parser replacing the generic one (find).
	custom func(p *parsed, args []string) error
	// effects
	write, net, code bool
	// fetch: the command's network use is fetching packages from a package
	// registry (npm install, go mod download): it gets the egress
	// allow-list registries unless the request names a network (fetch.go).
	fetch bool
	// plainWrite: the command's writes are edits of the files its operands
	// name (git: of the repository's index and objects), nothing that
	// discards work or lands where the policy did not look, so a fully
	// enforced workspace-write sandbox confines them completely (the
	// policy setting sandboxed_workspace_writes).
	plainWrite bool
	// post-parse hook: classify operands, add findings, set effects.
	post func(*parsed)
	// interactive: the command is safe to drive on a terminal (a pager, a
	// process viewer, git add -p): what is typed into it cannot run
	// programs. Other programs ask when they get a terminal.
	interactive bool

	optIndex map[string]*opt
}

type optUse struct {
	opt   *opt
	name  string // as matched (canonical first name)
	value string
	has   bool
}

type operand struct {
	value  string
	kind   Kind
	dirOpt bool // from a "work in this directory" option (-C, --git-dir)
	from   *opt // the option whose value this is (nil for operands)
}

type finding struct {
	verdict Verdict
	risk    Risk
	reason  string
}

// parsed is the result of parsing argv[1:] with a tool grammar.
type parsed struct {
	tool     string
	spec     *cmdSpec // deepest command spec
	subs     []string // subcommand path, e.g. ["mod","download"]
	opts     []optUse
	operands []operand
	paths    []operand // option values that are paths
	findings []finding
	// ttyOnly: denials of interactive options (onTerminal) that hold only
	// when the command has no terminal.
	ttyOnly  []finding
	write    bool
	net      bool
	code     bool
	fetch    bool // a package-registry fetch (cmdSpec.fetch)
	unparsed bool // tool without grammar
	// recursive: directory operands are read recursively (grep -r, rg,
	// cp -r, tar -c, diff -r).
	recursive bool
	// copyInto: when the last operand is an existing directory, the
	// command writes DIR/basename(source) (cp, mv, ln).
	copyInto bool
	// keepParents: cp --parents names the copy DIR/SOURCE, not DIR/basename.
	keepParents bool
	// backupSuffix: cp/mv/ln -b rename a replaced destination to DEST+suffix.
	backupSuffix string
	// inner is a wrapped command (env/timeout/sudo/sh -c), for explanation.
	inner [][]string
	// notPlain: why the options used make a plain write more than an edit
	// (opt.notPlain).
	notPlain []string
	// loopback: a network client (curl, wget) whose every destination is a
	// loopback address, with no option that sends it elsewhere
	// (loopbackOnly): networkFor may hold it to the workspace loopback.
	loopback bool
}

func (p *parsed) has(names ...string) bool {
	for _, u := range p.opts {
		for _, n := range names {
			for _, on := range u.opt.names {
				if on == n {
					return true
				}
			}
		}
	}
	return false
}

func (p *parsed) values(names ...string) []string {
	var out []string
	for _, u := range p.opts {
		for _, n := range names {
			if contains(u.opt.names, n) {
				out = append(out, u.value)
				break
			}
		}
	}
	return out
}

func (p *parsed) deny(risk Risk, f string, a ...any) {
	p.findings = append(p.findings, finding{Deny, risk, fmt.Sprintf(f, a...)})
}

func (p *parsed) ask(risk Risk, f string, a ...any) {
	p.findings = append(p.findings, finding{Ask, risk, fmt.Sprintf(f, a...)})
}

func (p *parsed) denied() bool {
	for _, f := range p.findings {
		if f.verdict == Deny {
			return true
		}
	}
	return false
}

// o builds an option. Flags in spec string: names separated by '|', then
// optional suffix "=" (required value), "?" (optional attached value).
func o(spec string, kind ...Kind) *opt {
	op := &opt{}
	switch {
	case strings.HasSuffix(spec, "="):
		op.arg = reqArg
		spec = strings.TrimSuffix(spec, "=")
	case strings.HasSuffix(spec, "?"):
		op.arg = optArg
		spec = strings.TrimSuffix(spec, "?")
	}
	op.names = strings.Split(spec, "|")
	if len(kind) > 0 {
		op.kind = kind[0]
	}
	return op
}

func (op *opt) denyWith(reason string) *opt   { op.deny = reason; return op }
func (op *opt) writes() *opt                  { op.write = true; return op }
func (op *opt) runsCode() *opt                { op.code = true; return op }
func (op *opt) movesDir() *opt                { op.workDir = true; return op }
func (op *opt) notPlainWrite(why string) *opt { op.notPlain = why; return op }

// onTerminal makes a denyWith option interactive: denied without a
// terminal, allowed on one (git add -p).
func (op *opt) onTerminal() *opt { op.tty = true; return op }

// flags builds many no-argument options from a space separated list; each
// word may be "a|b" aliases.
func flags(list string) []*opt {
	var out []*opt
	for _, w := range strings.Fields(list) {
		out = append(out, o(w))
	}
	return out
}

func (c *cmdSpec) index() {
	c.optIndex = map[string]*opt{}
	for _, op := range c.opts {
		for _, n := range op.names {
			if _, dup := c.optIndex[n]; dup {
				dupOpts = append(dupOpts, c.name+":"+n)
			}
			c.optIndex[n] = op
		}
	}
	for _, s := range c.subs {
		if s.name == "" {
			panic("policy: unnamed subcommand in " + c.name)
		}
		s.index()
	}
}

var dupOpts []string

const maxGrammarErr = 120

func clip(s string) string {
	if len(s) > maxGrammarErr {
		return s[:maxGrammarErr] + "…"
	}
	return s
}

// lookupLong finds a long option by exact name or unique GNU prefix.
func (c *cmdSpec) lookupLong(name string, parent *cmdSpec) (*opt, string, error) {
	specs := []*cmdSpec{c}
	if c.inherit && parent != nil {
		specs = append(specs, parent)
	}
	for _, s := range specs {
		if op, ok := s.optIndex[name]; ok {
			return op, name, nil
		}
	}
	if !strings.HasPrefix(name, "--") || len(name) < 4 {
		return nil, "", fmt.Errorf("unknown option %s", clip(name))
	}
	var found *opt
	var full string
	for _, s := range specs {
		for n, op := range s.optIndex {
			if strings.HasPrefix(n, "--") && strings.HasPrefix(n, name) {
				if found != nil && found != op {
					return nil, "", fmt.Errorf("ambiguous option %s", clip(name))
				}
				found, full = op, n
			}
		}
	}
	if found == nil {
		return nil, "", fmt.Errorf("unknown option %s", clip(name))
	}
	return found, full, nil
}

func (c *cmdSpec) lookupShort(ch byte, parent *cmdSpec) *opt {
	n := "-" + string(ch)
	if op, ok := c.optIndex[n]; ok {
		return op
	}
	if c.inherit && parent != nil {
		if op, ok := parent.optIndex[n]; ok {
			return op
		}
	}
	return nil
}

// parseArgs parses args (argv without argv[0]) against spec. An error
// means the command is not understood (denied on a guarded tool).
func parseArgs(tool string, spec *cmdSpec, args []string) (*parsed, error) {
	p := &parsed{tool: tool, spec: spec}
	if err := parseLevel(p, spec, nil, args); err != nil {
		return p, err
	}
	return p, nil
}

func parseLevel(p *parsed, c *cmdSpec, parent *cmdSpec, args []string) error {
	p.spec = c
	p.write = p.write || c.write
	p.net = p.net || c.net
	p.code = p.code || c.code
	p.fetch = p.fetch || c.fetch
	if c.free {
		for _, a := range args {
			p.operands = append(p.operands, operand{value: a, kind: KOther})
		}
		return nil
	}
	if c.custom != nil {
		return c.custom(p, args)
	}
	var ops []string
	addOpt := func(op *opt, name, val string, has bool) {
		p.opts = append(p.opts, optUse{opt: op, name: op.names[0], value: val, has: has})
		if op.deny != "" {
			shown := name
			if long := op.names[len(op.names)-1]; long != name {
				shown += " (" + long + ")"
			}
			if op.tty {
				p.ttyOnly = append(p.ttyOnly, finding{Deny, RiskCritical, fmt.Sprintf("%s %s: %s (it needs a terminal: plan it with tty)", p.cmdName(), shown, op.deny)})
			} else {
				p.deny(RiskCritical, "%s %s: %s", p.cmdName(), shown, op.deny)
			}
		}
		if op.write {
			p.write = true
		}
		if op.code {
			p.code = true
		}
		if op.notPlain != "" {
			p.notPlain = append(p.notPlain, name+" "+op.notPlain)
		}
		if has && (op.kind == KPathRead || op.kind == KPathWrite || op.kind == KURL) {
			p.paths = append(p.paths, operand{value: val, kind: op.kind, dirOpt: op.workDir, from: op})
		}
	}
	i := 0
	for i < len(args) {
		a := args[i]
		i++
		if c.posix && len(ops) > 0 {
			ops = append(ops, a)
			continue
		}
		if a == "--" {
			ops = append(ops, args[i:]...)
			break
		}
		if c.restMarker != "" && a == c.restMarker {
			ops = append(ops, args[i:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' || (c.operandLike != nil && c.operandLike(a)) {
			if c.subs != nil && len(ops) == 0 {
				name := a
				if al, ok := c.aliases[a]; ok {
					name = al
				}
				sub, ok := c.subs[name]
				if !ok {
					if c.needSub {
						return fmt.Errorf("unknown %s subcommand %q", p.cmdName(), clip(a))
					}
				} else {
					p.subs = append(p.subs, name)
					return parseLevel(p, sub, c, args[i:])
				}
			}
			ops = append(ops, a)
			continue
		}
		if c.numFlag != "" && isDigits(a[1:]) {
			op := c.optIndex[c.numFlag]
			addOpt(op, c.numFlag, a[1:], true)
			continue
		}
		if strings.HasPrefix(a, "--") || c.longSingleDash {
			name, val, hasVal := strings.Cut(a, "=")
			if c.longSingleDash && strings.HasPrefix(name, "--") {
				name = name[1:] // go accepts --flag as -flag
			}
			op, full, err := c.lookupLong(name, parent)
			if err != nil {
				return err
			}
			switch op.arg {
			case noArg:
				if hasVal {
					if c.longSingleDash && (val == "true" || val == "false") {
						addOpt(op, full, val, false)
						continue
					}
					return fmt.Errorf("option %s takes no value", full)
				}
				addOpt(op, full, "", false)
			case optArg:
				addOpt(op, full, val, hasVal)
			case reqArg:
				if !hasVal {
					if i >= len(args) {
						return fmt.Errorf("option %s needs a value", full)
					}
					val = args[i]
					i++
				}
				addOpt(op, full, val, true)
			}
			continue
		}
		// A multi-letter single-dash flag the grammar names as a whole
		// (wget -nH) is that flag, not a bundle.
		if op, ok := c.optIndex[a]; ok && len(a) > 2 && a[1] != '-' && op.arg == noArg {
			addOpt(op, a, "", false)
			continue
		}
		// bundled short options: -abc, -ofile, -c<k>=<v>
		for j := 1; j < len(a); j++ {
			op := c.lookupShort(a[j], parent)
			if op == nil {
				return fmt.Errorf("unknown option -%s", clip(printable(a[j:j+1])))
			}
			name := "-" + string(a[j])
			if op.arg == noArg {
				addOpt(op, name, "", false)
				continue
			}
			rest := a[j+1:]
			if op.arg == optArg {
				addOpt(op, name, rest, rest != "")
				break
			}
			if rest == "" {
				if i >= len(args) {
					return fmt.Errorf("option %s needs a value", name)
				}
				rest = args[i]
				i++
			}
			addOpt(op, name, rest, true)
			break
		}
	}
	if c.needSub && (len(ops) > 0 || !p.infoOnly()) {
		return fmt.Errorf("%s needs a subcommand", p.cmdName())
	}
	for k, v := range ops {
		kind := c.operand
		if c.hasFirst && k == 0 {
			kind = c.first
		} else if c.hasLast && k == len(ops)-1 && len(ops) >= 2 {
			kind = c.last
		}
		p.operands = append(p.operands, operand{value: v, kind: kind})
	}
	if c.post != nil {
		c.post(p)
	}
	return nil
}

// infoOnly: the command only asks for the program's version or help
// (npm --version, git --help): options named --version or --help, nothing
// else.
func (p *parsed) infoOnly() bool {
	if len(p.opts) == 0 || len(p.subs) > 0 || len(p.operands) > 0 || len(p.paths) > 0 {
		return false
	}
	for _, u := range p.opts {
		if !contains(u.opt.names, "--version") && !contains(u.opt.names, "--help") {
			return false
		}
	}
	return true
}

func (p *parsed) cmdName() string {
	if len(p.subs) == 0 {
		return p.tool
	}
	return p.tool + " " + strings.Join(p.subs, " ")
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func printable(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r > 0x7e {
			fmt.Fprintf(&b, "\\u%04x", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func opts(groups ...[]*opt) []*opt {
	var out []*opt
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func list(os ...*opt) []*opt { return os }

func sub(name string, c *cmdSpec) *cmdSpec { c.name = name; return c }

func subs(cs ...*cmdSpec) map[string]*cmdSpec {
	m := map[string]*cmdSpec{}
	for _, c := range cs {
		m[c.name] = c
	}
	return m
}

func baseName(s string) string {
	s = strings.TrimRight(s, "/")
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return "."
	}
	return s
}
