// Package grammar reads a command's argv the way its program does: option
// tables (cmdSpec, opt), subcommands, attached and separate values, "--",
// and the kind of each operand (a path read or written, a pattern, a URL).
// Findings (deny, ask) carry a verdict and risk from package verdict, the
// only policy package it imports. It knows no tool: the tables are built by
// the tool families (unixtools, devtools) through toolspec.
package grammar

import (
	"fmt"
	"strings"

	"github.com/termd/termd/daemon/policy/verdict"
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
	ReqArg
	optArg // only attached: -xVAL or --x=VAL
)

// Opt describes one option. Names: "-x" short, "--long" GNU long, or for
// single-dash long tools ("go", "find") "-name".
type Opt struct {
	Names []string
	Arg   argMode
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

// CmdSpec is the grammar of a tool or subcommand.
type CmdSpec struct {
	Name    string
	Opts    []*Opt
	Subs    map[string]*CmdSpec
	Aliases map[string]string // subcommand alias -> canonical
	// NeedSub: a subcommand is required (unknown operand = unknown subcommand).
	NeedSub bool
	// Inherit parent options (npm-style options anywhere).
	Inherit bool
	// LongSingleDash: "-name" is a long option (go). Short bundling is off.
	LongSingleDash bool
	// Posix: options end at the first operand.
	Posix bool
	// NumFlag: "-5" means "-n 5" (head, tail).
	NumFlag string
	// Operand kinds
	Operand  Kind
	First    Kind // kind of the first operand (when hasFirst)
	HasFirst bool
	Last     Kind // kind of the last operand when there are >= 2 (when hasLast)
	HasLast  bool
	// Free: every argument is data (echo, printf).
	Free bool
	// OperandLike: an argument starting with '-' that is really an operand
	// (chmod -x FILE).
	OperandLike func(string) bool
	// RestMarker: everything after this option is an operand (go test -args).
	RestMarker string
	// Custom parser replacing the generic one (find).
	Custom func(p *Parsed, args []string) error
	// effects
	Write, Net, Code bool
	// Fetch: the command's network use is fetching packages from a package
	// registry (npm install, go mod download): it gets the egress
	// allow-list registries unless the request names a network (fetch.go).
	Fetch bool
	// PlainWrite: the command's writes are edits of the files its operands
	// name (git: of the repository's index and objects), nothing that
	// discards work or lands where the policy did not look, so a fully
	// enforced workspace-write sandbox confines them completely (the
	// policy setting sandboxed_workspace_writes).
	PlainWrite bool
	// Post-parse hook: classify operands, add findings, set effects.
	Post func(*Parsed)
	// Interactive: the command is safe to drive on a terminal (a pager, a
	// process viewer, git add -p): what is typed into it cannot run
	// programs. Other programs ask when they get a terminal.
	Interactive bool

	OptIndex map[string]*Opt
}

type OptUse struct {
	Opt   *Opt
	Name  string // as matched (canonical first name)
	Value string
	Has   bool
}

type Operand struct {
	Value  string
	Kind   Kind
	DirOpt bool // from a "work in this directory" option (-C, --git-dir)
	From   *Opt // the option whose value this is (nil for operands)
}

type Finding struct {
	Verdict verdict.Verdict
	Risk    verdict.Risk
	Reason  string
}

// Parsed is the result of parsing argv[1:] with a tool grammar.
type Parsed struct {
	Tool     string
	Spec     *CmdSpec // deepest command spec
	Subs     []string // subcommand path, e.g. ["mod","download"]
	Opts     []OptUse
	Operands []Operand
	Paths    []Operand // option values that are paths
	Findings []Finding
	// TtyOnly: denials of interactive options (onTerminal) that hold only
	// when the command has no terminal.
	TtyOnly  []Finding
	Write    bool
	Net      bool
	Code     bool
	Fetch    bool // a package-registry fetch (cmdSpec.fetch)
	Unparsed bool // tool without grammar
	// Recursive: directory operands are read recursively (grep -r, rg,
	// cp -r, tar -c, diff -r).
	Recursive bool
	// CopyInto: when the last operand is an existing directory, the
	// command writes DIR/basename(source) (cp, mv, ln).
	CopyInto bool
	// KeepParents: cp --parents names the copy DIR/SOURCE, not DIR/basename.
	KeepParents bool
	// BackupSuffix: cp/mv/ln -b rename a replaced destination to DEST+suffix.
	BackupSuffix string
	// Inner is a wrapped command (env/timeout/sudo/sh -c), for explanation.
	Inner [][]string
	// NotPlain: why the options used make a plain write more than an edit
	// (opt.notPlain).
	NotPlain []string
	// Loopback: a network client (curl, wget) whose every destination is a
	// loopback address, with no option that sends it elsewhere
	// (loopbackOnly): networkFor may hold it to the workspace loopback.
	Loopback bool
}

func (p *Parsed) Has(names ...string) bool {
	for _, u := range p.Opts {
		for _, n := range names {
			for _, on := range u.Opt.Names {
				if on == n {
					return true
				}
			}
		}
	}
	return false
}

func (p *Parsed) Values(names ...string) []string {
	var out []string
	for _, u := range p.Opts {
		for _, n := range names {
			if Contains(u.Opt.Names, n) {
				out = append(out, u.Value)
				break
			}
		}
	}
	return out
}

func (p *Parsed) Deny(risk verdict.Risk, f string, a ...any) {
	p.Findings = append(p.Findings, Finding{verdict.Deny, risk, fmt.Sprintf(f, a...)})
}

func (p *Parsed) Ask(risk verdict.Risk, f string, a ...any) {
	p.Findings = append(p.Findings, Finding{verdict.Ask, risk, fmt.Sprintf(f, a...)})
}

func (p *Parsed) Denied() bool {
	for _, f := range p.Findings {
		if f.Verdict == verdict.Deny {
			return true
		}
	}
	return false
}

// O builds an option. Flags in spec string: names separated by '|', then
// optional suffix "=" (required value), "?" (optional attached value).
func O(spec string, kind ...Kind) *Opt {
	op := &Opt{}
	switch {
	case strings.HasSuffix(spec, "="):
		op.Arg = ReqArg
		spec = strings.TrimSuffix(spec, "=")
	case strings.HasSuffix(spec, "?"):
		op.Arg = optArg
		spec = strings.TrimSuffix(spec, "?")
	}
	op.Names = strings.Split(spec, "|")
	if len(kind) > 0 {
		op.kind = kind[0]
	}
	return op
}

func (op *Opt) DenyWith(reason string) *Opt   { op.deny = reason; return op }
func (op *Opt) Writes() *Opt                  { op.write = true; return op }
func (op *Opt) RunsCode() *Opt                { op.code = true; return op }
func (op *Opt) MovesDir() *Opt                { op.workDir = true; return op }
func (op *Opt) NotPlainWrite(why string) *Opt { op.notPlain = why; return op }

// OnTerminal makes a denyWith option interactive: denied without a
// terminal, allowed on one (git add -p).
func (op *Opt) OnTerminal() *Opt { op.tty = true; return op }

// Flags builds many no-argument options from a space separated list; each
// word may be "a|b" aliases.
func Flags(list string) []*Opt {
	var out []*Opt
	for _, w := range strings.Fields(list) {
		out = append(out, O(w))
	}
	return out
}

func (c *CmdSpec) Index() {
	c.OptIndex = map[string]*Opt{}
	for _, op := range c.Opts {
		for _, n := range op.Names {
			if _, dup := c.OptIndex[n]; dup {
				DupOpts = append(DupOpts, c.Name+":"+n)
			}
			c.OptIndex[n] = op
		}
	}
	for _, s := range c.Subs {
		if s.Name == "" {
			panic("policy: unnamed subcommand in " + c.Name)
		}
		s.Index()
	}
}

var DupOpts []string

const maxGrammarErr = 120

func Clip(s string) string {
	if len(s) > maxGrammarErr {
		return s[:maxGrammarErr] + "…"
	}
	return s
}

// lookupLong finds a long option by exact name or unique GNU prefix.
func (c *CmdSpec) lookupLong(name string, parent *CmdSpec) (*Opt, string, error) {
	specs := []*CmdSpec{c}
	if c.Inherit && parent != nil {
		specs = append(specs, parent)
	}
	for _, s := range specs {
		if op, ok := s.OptIndex[name]; ok {
			return op, name, nil
		}
	}
	if !strings.HasPrefix(name, "--") || len(name) < 4 {
		return nil, "", fmt.Errorf("unknown option %s", Clip(name))
	}
	var found *Opt
	var full string
	for _, s := range specs {
		for n, op := range s.OptIndex {
			if strings.HasPrefix(n, "--") && strings.HasPrefix(n, name) {
				if found != nil && found != op {
					return nil, "", fmt.Errorf("ambiguous option %s", Clip(name))
				}
				found, full = op, n
			}
		}
	}
	if found == nil {
		return nil, "", fmt.Errorf("unknown option %s", Clip(name))
	}
	return found, full, nil
}

func (c *CmdSpec) lookupShort(ch byte, parent *CmdSpec) *Opt {
	n := "-" + string(ch)
	if op, ok := c.OptIndex[n]; ok {
		return op
	}
	if c.Inherit && parent != nil {
		if op, ok := parent.OptIndex[n]; ok {
			return op
		}
	}
	return nil
}

// ParseArgs parses args (argv without argv[0]) against spec. An error
// means the command is not understood (denied on a guarded tool).
func ParseArgs(tool string, spec *CmdSpec, args []string) (*Parsed, error) {
	p := &Parsed{Tool: tool, Spec: spec}
	if err := parseLevel(p, spec, nil, args); err != nil {
		return p, err
	}
	return p, nil
}

func parseLevel(p *Parsed, c *CmdSpec, parent *CmdSpec, args []string) error {
	p.Spec = c
	p.Write = p.Write || c.Write
	p.Net = p.Net || c.Net
	p.Code = p.Code || c.Code
	p.Fetch = p.Fetch || c.Fetch
	if c.Free {
		for _, a := range args {
			p.Operands = append(p.Operands, Operand{Value: a, Kind: KOther})
		}
		return nil
	}
	if c.Custom != nil {
		return c.Custom(p, args)
	}
	var ops []string
	i := 0
	for i < len(args) {
		a := args[i]
		i++
		if c.Posix && len(ops) > 0 {
			ops = append(ops, a)
			continue
		}
		if a == "--" {
			ops = append(ops, args[i:]...)
			break
		}
		if c.RestMarker != "" && a == c.RestMarker {
			ops = append(ops, args[i:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' || (c.OperandLike != nil && c.OperandLike(a)) {
			if c.Subs != nil && len(ops) == 0 {
				name := a
				if al, ok := c.Aliases[a]; ok {
					name = al
				}
				sub, ok := c.Subs[name]
				if !ok {
					if c.NeedSub {
						return fmt.Errorf("unknown %s subcommand %q", p.CmdName(), Clip(a))
					}
				} else {
					p.Subs = append(p.Subs, name)
					return parseLevel(p, sub, c, args[i:])
				}
			}
			ops = append(ops, a)
			continue
		}
		if c.NumFlag != "" && IsDigits(a[1:]) {
			op := c.OptIndex[c.NumFlag]
			addOpt(p, op, c.NumFlag, a[1:], true)
			continue
		}
		if strings.HasPrefix(a, "--") || c.LongSingleDash {
			var err error
			if i, err = parseLong(p, c, parent, a, args, i); err != nil {
				return err
			}
			continue
		}
		// A multi-letter single-dash flag the grammar names as a whole
		// (wget -nH) is that flag, not a bundle.
		if op, ok := c.OptIndex[a]; ok && len(a) > 2 && a[1] != '-' && op.Arg == noArg {
			addOpt(p, op, a, "", false)
			continue
		}
		var err error
		if i, err = parseShort(p, c, parent, a, args, i); err != nil {
			return err
		}
	}
	if c.NeedSub && (len(ops) > 0 || !p.InfoOnly()) {
		return fmt.Errorf("%s needs a subcommand", p.CmdName())
	}
	for k, v := range ops {
		kind := c.Operand
		if c.HasFirst && k == 0 {
			kind = c.First
		} else if c.HasLast && k == len(ops)-1 && len(ops) >= 2 {
			kind = c.Last
		}
		p.Operands = append(p.Operands, Operand{Value: v, Kind: kind})
	}
	if c.Post != nil {
		c.Post(p)
	}
	return nil
}

// addOpt records option op as given (name, its value), with what it says
// about the command: denied, writes, runs code, not a plain write, a path.
func addOpt(p *Parsed, op *Opt, name, val string, has bool) {
	p.Opts = append(p.Opts, OptUse{Opt: op, Name: op.Names[0], Value: val, Has: has})
	if op.deny != "" {
		shown := name
		if long := op.Names[len(op.Names)-1]; long != name {
			shown += " (" + long + ")"
		}
		if op.tty {
			p.TtyOnly = append(p.TtyOnly, Finding{verdict.Deny, verdict.RiskCritical, fmt.Sprintf("%s %s: %s (it needs a terminal: plan it with tty)", p.CmdName(), shown, op.deny)})
		} else {
			p.Deny(verdict.RiskCritical, "%s %s: %s", p.CmdName(), shown, op.deny)
		}
	}
	if op.write {
		p.Write = true
	}
	if op.code {
		p.Code = true
	}
	if op.notPlain != "" {
		p.NotPlain = append(p.NotPlain, name+" "+op.notPlain)
	}
	if has && (op.kind == KPathRead || op.kind == KPathWrite || op.kind == KURL) {
		p.Paths = append(p.Paths, Operand{Value: val, Kind: op.kind, DirOpt: op.workDir, From: op})
	}
}

// parseLong reads the long option a (--name, --name=value, or -name for a
// tool with long single-dash options), taking its value from args[i] when
// it needs one; it returns where the next argument is.
func parseLong(p *Parsed, c *CmdSpec, parent *CmdSpec, a string, args []string, i int) (int, error) {
	name, val, hasVal := strings.Cut(a, "=")
	if c.LongSingleDash && strings.HasPrefix(name, "--") {
		name = name[1:] // go accepts --flag as -flag
	}
	op, full, err := c.lookupLong(name, parent)
	if err != nil {
		return i, err
	}
	switch op.Arg {
	case noArg:
		if hasVal {
			if c.LongSingleDash && (val == "true" || val == "false") {
				addOpt(p, op, full, val, false)
				return i, nil
			}
			return i, fmt.Errorf("option %s takes no value", full)
		}
		addOpt(p, op, full, "", false)
	case optArg:
		addOpt(p, op, full, val, hasVal)
	case ReqArg:
		if !hasVal {
			if i >= len(args) {
				return i, fmt.Errorf("option %s needs a value", full)
			}
			val = args[i]
			i++
		}
		addOpt(p, op, full, val, true)
	}
	return i, nil
}

// parseShort reads a bundle of short options (-abc, -ofile, -c<k>=<v>),
// taking a value from args[i] when the last one needs it; it returns where
// the next argument is.
func parseShort(p *Parsed, c *CmdSpec, parent *CmdSpec, a string, args []string, i int) (int, error) {
	for j := 1; j < len(a); j++ {
		op := c.lookupShort(a[j], parent)
		if op == nil {
			return i, fmt.Errorf("unknown option -%s", Clip(Printable(a[j:j+1])))
		}
		name := "-" + string(a[j])
		if op.Arg == noArg {
			addOpt(p, op, name, "", false)
			continue
		}
		rest := a[j+1:]
		if op.Arg == optArg {
			addOpt(p, op, name, rest, rest != "")
			break
		}
		if rest == "" {
			if i >= len(args) {
				return i, fmt.Errorf("option %s needs a value", name)
			}
			rest = args[i]
			i++
		}
		addOpt(p, op, name, rest, true)
		break
	}
	return i, nil
}

// InfoOnly: the command only asks for the program's version or help
// (npm --version, git --help): options named --version or --help, nothing
// else.
func (p *Parsed) InfoOnly() bool {
	if len(p.Opts) == 0 || len(p.Subs) > 0 || len(p.Operands) > 0 || len(p.Paths) > 0 {
		return false
	}
	for _, u := range p.Opts {
		if !Contains(u.Opt.Names, "--version") && !Contains(u.Opt.Names, "--help") {
			return false
		}
	}
	return true
}

func (p *Parsed) CmdName() string {
	if len(p.Subs) == 0 {
		return p.Tool
	}
	return p.Tool + " " + strings.Join(p.Subs, " ")
}

func IsDigits(s string) bool {
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

func Printable(s string) string {
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

func Opts(groups ...[]*Opt) []*Opt {
	var out []*Opt
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func List(os ...*Opt) []*Opt { return os }

func Sub(name string, c *CmdSpec) *CmdSpec { c.Name = name; return c }

func Subs(cs ...*CmdSpec) map[string]*CmdSpec {
	m := map[string]*CmdSpec{}
	for _, c := range cs {
		m[c.Name] = c
	}
	return m
}

func BaseName(s string) string {
	s = strings.TrimRight(s, "/")
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return "."
	}
	return s
}
