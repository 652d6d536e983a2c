package unixtools

import (
	"regexp"
	"strings"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
)

var _ = toolspec.Family(registerSedAwk)

// find, sed and awk: their expressions and programs are read, and
// refused where they run commands or write files.
func registerSedAwk() {
	R := grammar.KPathRead
	toolspec.Reg("sed", &grammar.CmdSpec{Operand: R, PlainWrite: true, Post: postSed, Opts: grammar.Opts(grammar.Flags("-n|--quiet|--silent -E|-r|--regexp-extended -s|--separate -u|--unbuffered -z|--null-data --posix --debug --sandbox --follow-symlinks -b|--binary --help --version"),
		grammar.List(grammar.O("-e|--expression="), grammar.O("-f|--file=").DenyWith(toolspec.WhyUnchecked+" (sed script file)"), grammar.O("-i|--in-place?").Writes(), grammar.O("-l|--line-length=")))})
	toolspec.Reg("awk|mawk|gawk|nawk|original-awk", &grammar.CmdSpec{Operand: R, Posix: true, Post: postAwk, Opts: grammar.List(grammar.O("-F="), grammar.O("-v="), grammar.O("-f=").DenyWith(toolspec.WhyUnchecked+" (awk program file)"), grammar.O("-W=").DenyWith("mawk -W options are not checked"), grammar.O("--version"))})
}

var findArity = map[string]int{}

var findDeny = map[string]string{
	"-exec": toolspec.WhyExec, "-execdir": toolspec.WhyExec, "-ok": toolspec.WhyExec, "-okdir": toolspec.WhyExec,
	"-delete": "deletes files", "-fprint": "writes a file", "-fprint0": "writes a file", "-fprintf": "writes a file", "-fls": "writes a file",
}

var findNewerRE = regexp.MustCompile(`^-newer[amcBt][amcBt]$`)

var _ = toolspec.Family(registerFind)

func registerFind() {
	toolspec.Reg("find", &grammar.CmdSpec{Custom: parseFind})
	for _, w := range strings.Fields("-print -print0 -ls -prune -quit -true -false -empty -executable -readable -writable -nouser -nogroup -depth -d -mount -xdev -noleaf -daystart -follow -ignore_readdir_race -noignore_readdir_race -a -and -o -or -not ! ( ) , -help --help -version --version") {
		findArity[w] = 0
	}
	for _, w := range strings.Fields("-name -iname -path -ipath -wholename -iwholename -regex -iregex -type -xtype -size -mtime -atime -ctime -mmin -amin -cmin -newer -anewer -cnewer -perm -user -group -uid -gid -links -inum -samefile -maxdepth -mindepth -regextype -printf -lname -ilname -used -fstype -context -files0-from") {
		findArity[w] = 1
	}
}

func parseFind(p *grammar.Parsed, args []string) error {
	i := 0
	// leading options
	for i < len(args) {
		a := args[i]
		if a == "-H" || a == "-L" || a == "-P" || strings.HasPrefix(a, "-O") && len(a) <= 3 {
			i++
			continue
		}
		if a == "-D" {
			i += 2
			continue
		}
		break
	}
	// starting points
	for i < len(args) {
		a := args[i]
		if strings.HasPrefix(a, "-") || a == "(" || a == ")" || a == "!" || a == "," {
			break
		}
		p.Operands = append(p.Operands, grammar.Operand{Value: a, Kind: grammar.KPathRead})
		i++
	}
	for i < len(args) {
		a := args[i]
		i++
		if why, bad := findDeny[a]; bad {
			p.Opts = append(p.Opts, grammar.OptUse{Opt: &grammar.Opt{Names: []string{a}}, Name: a})
			p.Deny(verdict.RiskCritical, "find %s: %s", a, why)
			if a == "-exec" || a == "-execdir" || a == "-ok" || a == "-okdir" {
				var inner []string
				for i < len(args) && args[i] != ";" && args[i] != "+" {
					inner = append(inner, args[i])
					i++
				}
				i++
				if len(inner) > 0 {
					p.Inner = append(p.Inner, inner)
				}
			} else if a != "-delete" {
				i++ // file
				if a == "-fprintf" {
					i++
				}
			}
			continue
		}
		n, ok := findArity[a]
		if !ok && findNewerRE.MatchString(a) {
			n, ok = 1, true
		}
		if !ok {
			return grammar.Errf("unknown find expression %s", grammar.Clip(grammar.Printable(a)))
		}
		var val string
		if n == 1 {
			if i >= len(args) {
				return grammar.Errf("find %s needs a value", a)
			}
			val = args[i]
			i++
		}
		op := &grammar.Opt{Names: []string{a}}
		p.Opts = append(p.Opts, grammar.OptUse{Opt: op, Name: a, Value: val, Has: n == 1})
		if a == "-newer" || a == "-anewer" || a == "-cnewer" || a == "-samefile" || a == "-files0-from" || (findNewerRE.MatchString(a) && !strings.HasSuffix(a, "t")) {
			// -newerXY FILE compares with FILE's times (-newerXt takes a date).
			p.Paths = append(p.Paths, grammar.Operand{Value: val, Kind: grammar.KPathRead})
		}
	}
	if len(p.Operands) == 0 {
		p.Operands = append(p.Operands, grammar.Operand{Value: ".", Kind: grammar.KPathRead})
	}
	return nil
}

func postSed(p *grammar.Parsed) {
	scripts := p.Values("-e")
	if !p.Has("-e", "-f") {
		if len(p.Operands) == 0 {
			p.Deny(verdict.RiskLow, "sed: missing script")
			return
		}
		scripts = append(scripts, p.Operands[0].Value)
		p.Operands[0].Kind = grammar.KOther
	}
	for _, s := range scripts {
		if why := checkSedScript(s); why != "" {
			p.Deny(verdict.RiskCritical, "sed: %s", why)
		}
	}
	if p.Has("-i") {
		p.Write = true
		suffixes := p.Values("-i")
		for _, suf := range suffixes {
			if suf != "" && p.Has("--follow-symlinks") {
				p.Deny(verdict.RiskHigh, "sed -i%s --follow-symlinks: the backup is named after each link's target, which is not checked; drop the suffix or --follow-symlinks", suf)
				break
			}
		}
		for i := range p.Operands {
			if p.Operands[i].Kind != grammar.KPathRead {
				continue
			}
			p.Operands[i].Kind = grammar.KPathWrite
			// sed -iSUFFIX keeps a backup copy: FILE+SUFFIX, or SUFFIX with
			// each '*' replaced by the file's base name (which may name
			// another directory). The backup is a write like any other.
			for _, suf := range suffixes {
				if suf == "" {
					continue
				}
				f := p.Operands[i].Value
				var b string
				if strings.Contains(suf, "*") {
					b = strings.ReplaceAll(suf, "*", grammar.BaseName(f))
					if !strings.Contains(b, "/") {
						if j := strings.LastIndexByte(f, '/'); j >= 0 {
							b = f[:j+1] + b
						}
					}
				} else {
					b = f + suf
				}
				p.Paths = append(p.Paths, grammar.Operand{Value: b, Kind: grammar.KPathWrite})
			}
		}
	}
}

// checkSedScript returns a reason if the script can run commands, write or
// read files, or cannot be understood.
func checkSedScript(s string) string {
	z := &sedScan{s: s, n: len(s)}
	for {
		for z.i < z.n && (s[z.i] == ' ' || s[z.i] == '\t' || s[z.i] == '\n' || s[z.i] == ';') {
			z.i++
		}
		if z.i >= z.n {
			return ""
		}
		if why := z.addresses(); why != "" {
			return why
		}
		c := s[z.i]
		z.i++
		if c == '{' || c == '}' {
			continue
		}
		if why := z.command(c); why != "" {
			return why
		}
		z.skipSpace()
		if z.i < z.n && !(s[z.i] == ';' || s[z.i] == '\n' || s[z.i] == '}' || s[z.i] == '#') {
			return "unexpected text after command (the script cannot be checked)"
		}
	}
}

// sedScan reads a sed script: s from position i on (n = len(s)).
type sedScan struct {
	s    string
	i, n int
}

func (z *sedScan) skipSpace() {
	for z.i < z.n && (z.s[z.i] == ' ' || z.s[z.i] == '\t') {
		z.i++
	}
}

// readDelimited reads up to and past the delimiter d (a regex, a
// replacement); false when the script ends first.
func (z *sedScan) readDelimited(d byte) bool {
	for z.i < z.n {
		c := z.s[z.i]
		if c == '\\' {
			z.i += 2
			continue
		}
		if c == '\n' && d != '\n' {
			// GNU sed allows escaped newlines only
			return false
		}
		if c == d {
			z.i++
			return true
		}
		z.i++
	}
	return false
}

// readAddr reads one address: a line number (with ~step), $, or a regex.
func (z *sedScan) readAddr() bool {
	s, n := z.s, z.n
	z.skipSpace()
	if z.i >= n {
		return true
	}
	switch c := s[z.i]; {
	case c >= '0' && c <= '9':
		for z.i < n && (s[z.i] >= '0' && s[z.i] <= '9' || s[z.i] == '~') {
			z.i++
		}
	case c == '$':
		z.i++
	case c == '/' || c == '\\':
		d := byte('/')
		if c == '\\' {
			if z.i+1 >= n {
				return false
			}
			d = s[z.i+1]
			z.i++
		}
		z.i++
		if !z.readDelimited(d) {
			return false
		}
		for z.i < n && (s[z.i] == 'I' || s[z.i] == 'M') {
			z.i++
		}
	}
	return true
}

// addresses reads a command's address range and negations, up to the
// command letter; "" or what is wrong.
func (z *sedScan) addresses() string {
	s, n := z.s, z.n
	if !z.readAddr() {
		return "unterminated address"
	}
	z.skipSpace()
	if z.i < n && s[z.i] == ',' {
		z.i++
		z.skipSpace()
		if z.i < n && (s[z.i] == '+' || s[z.i] == '~') {
			z.i++
		}
		if !z.readAddr() {
			return "unterminated address"
		}
	}
	z.skipSpace()
	for z.i < n && s[z.i] == '!' {
		z.i++
		z.skipSpace()
	}
	if z.i >= n {
		return "missing command"
	}
	return ""
}

// command reads the arguments of command c; "" or why it is refused.
func (z *sedScan) command(c byte) string {
	s, n := z.s, z.n
	switch c {
	case '=', 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
	case 'l', 'q', 'Q', 'L':
		z.skipSpace()
		for z.i < n && s[z.i] >= '0' && s[z.i] <= '9' {
			z.i++
		}
	case ':', 'b', 't', 'T', 'v':
		// GNU sed ends a label (or v's version) at a blank as well as
		// at ';' or a newline, and reads what follows as the next
		// command: ":a e id" runs "e id". The check after the command
		// refuses any text after the label other than ';', '}', '#' or
		// a newline.
		z.skipSpace()
		for z.i < n && s[z.i] != ';' && s[z.i] != '\n' && s[z.i] != '}' && s[z.i] != ' ' && s[z.i] != '\t' {
			z.i++
		}
	case '#':
		for z.i < n && s[z.i] != '\n' {
			z.i++
		}
	case 'a', 'i', 'c':
		for z.i < n && s[z.i] != '\n' {
			if s[z.i] == '\\' {
				z.i++
			}
			z.i++
		}
	case 'e':
		return "the e command runs a shell command"
	case 'w', 'W':
		return "the " + string(c) + " command writes a file"
	case 'r', 'R':
		return "the " + string(c) + " command reads a file named in the script"
	case 's', 'y':
		return z.substitution(c)
	default:
		return "unknown command " + grammar.Printable(string(c)) + " (the script cannot be checked)"
	}
	return ""
}

// substitution reads s/re/repl/flags or y/src/dst/; the e and w flags are
// refused.
func (z *sedScan) substitution(c byte) string {
	s, n := z.s, z.n
	if z.i >= n || s[z.i] == '\n' || s[z.i] == '\\' {
		return "bad " + string(c) + " command"
	}
	d := s[z.i]
	z.i++
	if !z.readDelimited(d) || !z.readDelimited(d) {
		return "unterminated " + string(c) + " command"
	}
	if c == 'y' {
		return ""
	}
	for z.i < n {
		f := s[z.i]
		switch {
		case f == 'g' || f == 'p' || f == 'i' || f == 'I' || f == 'm' || f == 'M' || f >= '0' && f <= '9':
			z.i++
			continue
		case f == 'e':
			return "the s///e flag runs the pattern space as a command"
		case f == 'w':
			return "the s///w flag writes a file"
		}
		break
	}
	return ""
}

func postAwk(p *grammar.Parsed) {
	if p.Has("-f") {
		return
	}
	if len(p.Operands) == 0 {
		p.Deny(verdict.RiskLow, "awk: missing program")
		return
	}
	p.Operands[0].Kind = grammar.KOther
	if why := checkAwkProgram(p.Operands[0].Value); why != "" {
		p.Deny(verdict.RiskCritical, "awk: %s", why)
	}
	for i := 1; i < len(p.Operands); i++ {
		if awkAssignRE.MatchString(p.Operands[i].Value) {
			p.Operands[i].Kind = grammar.KOther // var=value assignment
		}
	}
}

// checkAwkProgram is conservative: it strips strings and regex literals,
// then refuses system(), pipes, getline, output redirection and
// extension loading.
func checkAwkProgram(prog string) string {
	var b strings.Builder
	prevSig := byte(0) // last significant char
	for i := 0; i < len(prog); i++ {
		c := prog[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(prog) && prog[j] != '"' {
				if prog[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(prog) {
				return "unterminated string (the program cannot be checked)"
			}
			b.WriteString(`""`)
			i = j
			prevSig = '"'
			continue
		case c == '/':
			regex, why := awkSlashIsRegex(prog, i, prevSig, b.String())
			if why != "" {
				return why
			}
			if !regex {
				break
			}
			j, why := awkRegexEnd(prog, i+1)
			if why != "" {
				return why
			}
			b.WriteString("//")
			i = j
			prevSig = '/'
			continue
		case c == '\\' && i+1 < len(prog) && prog[i+1] == '\n':
			// A line continuation is blank space to awk: it does not change
			// what a following '/' means.
			b.WriteString("\\\n")
			i++
			continue
		case c == '#':
			for i < len(prog) && prog[i] != '\n' {
				i++
			}
			b.WriteByte('\n')
			prevSig = '\n'
			continue
		}
		b.WriteByte(c)
		if c != ' ' && c != '\t' {
			prevSig = c
		}
	}
	code := b.String()
	for _, w := range awkWordRE.FindAllString(code, -1) {
		switch w {
		case "system":
			return "system() runs a shell command"
		case "getline":
			return "getline can read from commands or files"
		case "ARGV", "ARGC":
			return "changing ARGV/ARGC makes awk read files named in the program"
		case "fflush", "close":
			// harmless on stdout, but close() only matters with pipes
		case "ENVIRON", "PROCINFO":
		}
	}
	if strings.Contains(code, "@") {
		return "@load/@include extensions are not allowed"
	}
	stripped := strings.ReplaceAll(code, "||", "  ")
	if strings.Contains(stripped, "|") {
		return "pipes to or from commands run a shell"
	}
	// print/printf ... > file (or >>)
	for _, stmt := range splitAwkStatements(code) {
		loc := regexp.MustCompile(`\bprintf?\b`).FindStringIndex(stmt)
		if loc == nil {
			continue
		}
		depth := 0
		for _, ch := range stmt[loc[1]:] {
			switch ch {
			case '(':
				depth++
			case ')':
				depth--
			case '>':
				if depth <= 0 {
					return "print > file writes a file"
				}
			}
		}
	}
	return ""
}

// awkKeywordsBeforeOperand are words after which awk expects an operand, so
// a '/' there starts a regex literal.
var awkKeywordsBeforeOperand = grammar.Set("print printf return case do else exit in")

// awkSlashIsRegex decides whether the '/' at prog[i] starts a regex literal
// (as awk's lexer would) or is division. Where awk implementations could
// disagree, the program is refused: a wrong guess would hide code inside a
// "regex" or start a "comment" or "string" inside a real regex.
func awkSlashIsRegex(prog string, i int, prevSig byte, code string) (bool, string) {
	const ambiguous = "a '/' whose meaning (division or regex) is ambiguous (the program cannot be checked)"
	switch {
	case prevSig == 0 || strings.IndexByte("(,~!{};&|\n=<>?:*%^[", prevSig) >= 0:
		return true, ""
	case prevSig == '+' || prevSig == '-':
		// "x++ / 2" is division, "a - /re/" a regex: refuse both.
		return false, ambiguous
	case prevSig == '/' || prevSig == '$':
		// "$/re/" is a field selected by a regex match in mawk and gawk.
		return false, ambiguous
	case prevSig == ')' && closesCondition(code):
		// "if (x) /re/ ..." in gawk: a regex after a condition.
		return false, ambiguous
	case prevSig == '_' || prevSig >= 'a' && prevSig <= 'z' || prevSig >= 'A' && prevSig <= 'Z' || prevSig >= '0' && prevSig <= '9':
		t := strings.TrimRight(code, " \t")
		k := len(t)
		for k > 0 && (t[k-1] == '_' || t[k-1] >= 'a' && t[k-1] <= 'z' || t[k-1] >= 'A' && t[k-1] <= 'Z' || t[k-1] >= '0' && t[k-1] <= '9') {
			k--
		}
		if awkKeywordsBeforeOperand[t[k:]] {
			return true, ""
		}
		if t[k:] == "length" {
			// "length / x": awk reads a call of length without parentheses,
			// then a regex; a reader taking it as division would miss
			// whatever that "regex" hides.
			return false, ambiguous
		}
		return false, ""
	}
	return false, "" // after ')', ']', '$', a string or a number: division
}

// closesCondition reports whether the ')' ending code closes the condition of
// an if, while or for.
func closesCondition(code string) bool {
	t := strings.TrimRight(code, " \t")
	depth := 0
	for k := len(t) - 1; k >= 0; k-- {
		switch t[k] {
		case ')':
			depth++
		case '(':
			depth--
			if depth == 0 {
				w := strings.TrimRight(t[:k], " \t")
				j := len(w)
				for j > 0 && (w[j-1] >= 'a' && w[j-1] <= 'z') {
					j--
				}
				switch w[j:] {
				case "if", "while", "for":
					return true
				}
				return false
			}
		}
	}
	return false
}

// awkRegexEnd returns the index of the '/' closing the regex literal that
// starts at prog[j]. Bracket expressions are skipped; a '/' or newline
// inside one is refused (awk implementations differ there).
func awkRegexEnd(prog string, j int) (int, string) {
	const bad = "unterminated or ambiguous regex (the program cannot be checked)"
	for j < len(prog) {
		switch prog[j] {
		case '\\':
			j += 2
			continue
		case '\n':
			return 0, bad
		case '/':
			return j, ""
		case '[':
			j++
			if j < len(prog) && prog[j] == '^' {
				j++
			}
			if j < len(prog) && prog[j] == ']' {
				j++
			}
			for j < len(prog) && prog[j] != ']' {
				switch prog[j] {
				case '/', '\n':
					return 0, "a '/' inside a bracket expression of a regex literal (the program cannot be checked)"
				case '\\':
					j++
				case '[':
					if j+1 < len(prog) && strings.IndexByte(":.=", prog[j+1]) >= 0 {
						end := strings.Index(prog[j+2:], string(prog[j+1])+"]")
						if end < 0 {
							return 0, bad
						}
						if strings.ContainsAny(prog[j+2:j+2+end], "/\n") {
							return 0, "a '/' inside a bracket expression of a regex literal (the program cannot be checked)"
						}
						j += 2 + end + 1
					}
				}
				j++
			}
			if j >= len(prog) {
				return 0, bad
			}
		}
		j++
	}
	return 0, bad
}

// splitAwkStatements splits stripped awk code into simple statements. A
// newline continues the statement after a backslash and after ',', '&&',
// '||', '?' and ':' (gawk), as awk's grammar does, so "print x,\n> f" is
// one statement.
func splitAwkStatements(code string) []string {
	var b strings.Builder
	for i := 0; i < len(code); i++ {
		c := code[i]
		if c == '\\' && i+1 < len(code) && code[i+1] == '\n' {
			b.WriteString("  ")
			i++
			continue
		}
		if c == '\n' {
			prev := strings.TrimRight(b.String(), " \t")
			if prev != "" && strings.IndexByte(",&|?:", prev[len(prev)-1]) >= 0 {
				b.WriteByte(' ')
				continue
			}
		}
		b.WriteByte(c)
	}
	return strings.FieldsFunc(b.String(), func(r rune) bool { return r == ';' || r == '\n' || r == '{' || r == '}' })
}

var (
	awkWordRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	// awkAssignRE is an operand awk takes as an assignment rather than a
	// file: a valid variable name, then '='. Anything else is a file.
	awkAssignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)
