package policy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
)

// Each listed tool: argv that must be allowed or asked (never denied) in
// trusted mode, and argv that must be denied (with a reason substring).
func TestToolGrammars(t *testing.T) {
	f := newFixture(t)
	type tc struct {
		ok   [][]string
		deny map[string][]string // reason -> argv
	}
	tools := map[string]tc{
		"ls":     {ok: [][]string{{"ls"}, {"ls", "-la", "src"}, {"ls", "-lhS", "--color=never"}, {"ls", "--sort=time", "-r"}, {"ls", "--gro"}}, deny: map[string][]string{"unknown option": {"ls", "-j"}}},
		"cat":    {ok: [][]string{{"cat", "data.txt"}, {"cat", "-n", "--", "-weird"}}, deny: map[string][]string{"unknown option": {"cat", "--bogus"}}},
		"head":   {ok: [][]string{{"head", "-n", "3", "data.txt"}, {"head", "-3", "data.txt"}, {"head", "-c10", "data.txt"}, {"head", "--lines=2"}}, deny: map[string][]string{"needs a value": {"head", "-c"}}},
		"tail":   {ok: [][]string{{"tail", "-f", "data.txt"}, {"tail", "-n", "+2", "data.txt"}, {"tail", "--follow=name", "data.txt"}}, deny: map[string][]string{"unknown option": {"tail", "-Q"}}},
		"wc":     {ok: [][]string{{"wc", "-lw", "data.txt"}}, deny: map[string][]string{"secrets": {"wc", "--files0-from=" + f.home + "/.ssh/id_rsa"}}},
		"stat":   {ok: [][]string{{"stat", "-c", "%s", "data.txt"}, {"stat", "--format=%n", "data.txt"}}, deny: map[string][]string{"unknown option": {"stat", "-Z"}}},
		"file":   {ok: [][]string{{"file", "-b", "data.txt"}, {"file", "--mime-type", "data.txt"}}, deny: map[string][]string{"sandbox": {"file", "--no-sandbox", "x"}, "unknown option": {"file", "-C"}}},
		"du":     {ok: [][]string{{"du", "-sh", "."}, {"du", "-d", "1"}, {"du", "--max-depth=2"}}, deny: map[string][]string{"unknown option": {"du", "-Q"}}},
		"df":     {ok: [][]string{{"df", "-h"}, {"df", "-T", "."}}, deny: map[string][]string{"unknown option": {"df", "--frob"}}},
		"pwd":    {ok: [][]string{{"pwd"}, {"pwd", "-P"}}, deny: map[string][]string{"unknown option": {"pwd", "-x"}}},
		"grep":   {ok: [][]string{{"grep", "-rn", "TODO", "."}, {"grep", "-e", "a|b", "data.txt"}, {"grep", "--include=*.go", "-r", "x"}, {"grep", "-A3", "x", "data.txt"}}, deny: map[string][]string{"unknown option": {"grep", "-Y", "x"}}},
		"rg":     {ok: [][]string{{"rg", "a|b"}, {"rg", "-g", "*.go", "x"}, {"rg", "--files"}, {"rg", "-uu", "x"}, {"rg", "--type-add", "foo:*.foo", "x"}}, deny: map[string][]string{"preprocessor": {"rg", "--pre", "x", "y"}}},
		"fd":     {ok: [][]string{{"fd"}, {"fd", "\\.go$"}, {"fd", "-e", "go", "-t", "f", ".", "src"}, {"fd", "-H", "-E", ".git", "-g", "*.md"}, {"fd", "--base-directory", "src", "x"}, {"fd", "--changed-within", "2d", "x", "--search-path", "src"}}, deny: map[string][]string{"runs a command": {"fd", "-x", "rm", "{}"}, "with the results as arguments": {"fd", ".", "-X", "ls", "-l"}, "secrets": {"fd", "x", f.home + "/.ssh"}, "id_rsa": {"fd", "--base-directory", f.home, "--ignore-file", ".ssh/id_rsa"}}},
		"fdfind": {ok: [][]string{{"fdfind", "-g", "*.go"}}, deny: map[string][]string{"runs a command": {"fdfind", "--exec", "sh", "-c", "id"}}},
		"find":   {ok: [][]string{{"find"}, {"find", "-L", ".", "-type", "f", "-name", "*.go"}, {"find", ".", "(", "-name", "a", "-o", "-name", "b", ")", "-print0"}, {"find", ".", "-newermt", "2024-01-01"}}, deny: map[string][]string{"-exec": {"find", ".", "-exec", "id", "+"}, "unknown find expression": {"find", ".", "-frob"}}},
		"sort":   {ok: [][]string{{"sort", "-k2,2n", "-t,", "data.txt"}, {"sort", "-o", "out", "data.txt"}}, deny: map[string][]string{"compress-program": {"sort", "--compress-program", "sh", "data.txt"}}},
		"uniq":   {ok: [][]string{{"uniq", "-c", "data.txt"}, {"uniq", "data.txt", "out.txt"}}, deny: map[string][]string{".bashrc": {"uniq", "data.txt", ".bashrc"}}},
		"cut":    {ok: [][]string{{"cut", "-d:", "-f1,3", "data.txt"}, {"cut", "--fields=2", "data.txt"}}, deny: map[string][]string{"unknown option": {"cut", "-x"}}},
		"tr":     {ok: [][]string{{"tr", "-d", "\\r"}, {"tr", "a-z", "A-Z"}}, deny: map[string][]string{"unknown option": {"tr", "-x", "a", "b"}}},
		"diff":   {ok: [][]string{{"diff", "-u", "data.txt", "README.md"}, {"diff", "-ruN", "src", "dir"}, {"diff", "--unified=5", "data.txt", "README.md"}}, deny: map[string][]string{"secrets": {"diff", "data.txt", f.home + "/.ssh/id_rsa"}}},
		"sed":    {ok: [][]string{{"sed", "-n", "/a/,/b/p", "data.txt"}, {"sed", "-E", "s/(a|b)+/x/g;s/^/> /", "data.txt"}, {"sed", "-e", "1i\\\nhello", "data.txt"}, {"sed", "y/abc/xyz/", "data.txt"}, {"sed", "-i.bak", "s/a/b/", "data.txt"}, {"sed", "$!N;P;D", "data.txt"}}, deny: map[string][]string{"e command": {"sed", "2e", "data.txt"}, "cannot be checked": {"sed", "k", "data.txt"}}},
		"awk":    {ok: [][]string{{"awk", "-F,", "{s+=$2} END {print s}", "data.txt"}, {"awk", "-v", "x=1", "NR>x", "data.txt"}, {"awk", "length($0) > 80", "data.txt"}, {"awk", "{printf(\"%d\\n\", $1 > 2)}", "data.txt"}}, deny: map[string][]string{"system()": {"awk", "{system($0)}"}, "getline": {"awk", "{getline line < \"/etc/shadow\"}"}}},
		"tar":    {ok: [][]string{{"tar", "-czf", "out.tgz", "src"}, {"tar", "xvzf", "a.tar"}, {"tar", "--list", "--file=a.tar"}, {"tar", "-xf", "a.tar", "-C", "dir", "--strip-components=1"}}, deny: map[string][]string{"to-command": {"tar", "-x", "--to-command", "sh", "-f", "a.tar"}, "no operation": {"tar", "-f", "a.tar"}}},
		"gzip":   {ok: [][]string{{"gzip", "-k", "data.txt"}, {"gzip", "-dc", "a.gz"}, {"gzip", "-9", "data.txt"}}, deny: map[string][]string{".bashrc": {"gzip", ".bashrc"}}},
		"cp":     {ok: [][]string{{"cp", "-a", "src", "dir"}, {"cp", "data.txt", "dir/"}}, deny: map[string][]string{"missing destination": {"cp", "data.txt"}, ".bashrc": {"cp", "-l", f.home + "/.bashrc", "x"}}},
		"mv":     {ok: [][]string{{"mv", "-n", "data.txt", "dir/"}}, deny: map[string][]string{"outside the workspace": {"mv", "data.txt", f.out}}},
		"rm":     {ok: [][]string{{"rm", "-f", "data.txt"}, {"rm", "-r", "build"}, {"rm", "--", "-f"}}, deny: map[string][]string{"workspace": {"rm", "-r", "./"}}},
		"mkdir":  {ok: [][]string{{"mkdir", "-p", "a/b/c"}, {"mkdir", "-m", "700", "x"}}, deny: map[string][]string{".idea": {"mkdir", "-p", ".idea/x"}}},
		"touch":  {ok: [][]string{{"touch", "-d", "2024-01-01", "x"}, {"touch", "-r", "data.txt", "x"}}, deny: map[string][]string{"outside the workspace": {"touch", f.out + "/x"}}},
		"ln":     {ok: [][]string{{"ln", "-sf", "data.txt", "l"}, {"ln", "-s", f.out, "outlink"}, {"ln", "data.txt", "hard"}}, deny: map[string][]string{"secrets": {"ln", f.home + "/.ssh/id_rsa", "k"}}},
		"chmod":  {ok: [][]string{{"chmod", "u+x,g-w", "script.sh"}, {"chmod", "-R", "755", "src"}, {"chmod", "--reference=data.txt", "script.sh"}}, deny: map[string][]string{"changes /": {"chmod", "--no-preserve-root", "-R", "777", "/"}}},
		"git": {ok: [][]string{{"git", "status", "--porcelain=v2"}, {"git", "log", "--oneline", "-n5", "--", "src"}, {"git", "diff", "--cached", "--stat"}, {"git", "show", "HEAD~1:src/main.go"}, {"git", "branch", "-vv"}, {"git", "ls-files", "-z"}, {"git", "rev-parse", "--abbrev-ref", "HEAD"}, {"git", "blame", "-L", "1,5", "src/main.go"}, {"git", "grep", "-n", "x"}, {"git", "add", "-A"}, {"git", "commit", "-am", "msg"}, {"git", "restore", "--staged", "x"}, {"git", "switch", "-c", "feature"}, {"git", "checkout", "-b", "x"}, {"git", "fetch", "--prune"}, {"git", "pull", "--rebase"}, {"git", "push", "-u", "origin", "x"}, {"git", "clone", "--depth", "1", "https://e.com/r.git", "r2"}, {"git", "config", "--get", "remote.origin.url"}, {"git", "--no-pager", "log"}, {"git", "-C", "src", "status"}},
			deny: map[string][]string{"configuration": {"git", "-c", "x=y", "status"}, "secrets": {"git", "diff", "--no-index", f.home + "/.ssh/id_rsa", "data.txt"}, "outside the workspace": {"git", "-C", f.out, "commit", "-m", "x"}}},
		"go":     {ok: [][]string{{"go", "test", "-run", "TestX", "-count=1", "-v", "./..."}, {"go", "build", "-o", "bin/x", "./cmd/x"}, {"go", "vet", "./..."}, {"go", "mod", "tidy"}, {"go", "list", "-m", "all"}, {"go", "test", ".", "-args", "-weird"}, {"go", "run", ".", "-toolexec=x"}, {"go", "version"}}, deny: map[string][]string{"toolexec": {"go", "build", "-toolexec", "x", "."}, "unknown go subcommand": {"go", "frob"}}},
		"make":   {ok: [][]string{{"make", "-C", "src", "test"}, {"make", "-j4", "-k", "all", "V=1"}}, deny: map[string][]string{"outside the workspace": {"make", "-C", f.out}}},
		"npm":    {ok: [][]string{{"npm", "ci", "--ignore-scripts"}, {"npm", "run", "build", "--", "--watch"}, {"npm", "i", "-D", "typescript"}, {"npm", "ls", "--depth=0"}}, deny: map[string][]string{"node options": {"npm", "--node-options=--require=x", "test"}, "unknown npm subcommand": {"npm", "frob"}}},
		"pnpm":   {ok: [][]string{{"pnpm", "install", "--frozen-lockfile"}, {"pnpm", "run", "test"}}, deny: map[string][]string{"installs outside the workspace": {"pnpm", "add", "-g", "x"}}},
		"yarn":   {ok: [][]string{{"yarn", "install", "--immutable"}, {"yarn", "test"}}, deny: map[string][]string{"unknown yarn subcommand": {"yarn", "anything"}}},
		"cargo":  {ok: [][]string{{"cargo", "build", "--release", "-p", "x"}, {"cargo", "test", "--", "--nocapture"}, {"cargo", "tree"}, {"cargo", "fetch"}}, deny: map[string][]string{"browser": {"cargo", "doc", "--open"}}},
		"pytest": {ok: [][]string{{"pytest", "-x", "-k", "test_a", "tests/test_a.py::test_b"}, {"pytest", "--maxfail=2", "-q"}}, deny: map[string][]string{"plugin": {"pytest", "-p", "x"}}},
		"curl":   {ok: [][]string{{"curl", "-fsSL", "-o", "out.html", "https://e.com"}, {"curl", "-H", "Accept: x", "http://e.com"}}, deny: map[string][]string{"scheme": {"curl", "gopher://e.com"}, "redirect protocols": {"curl", "--proto-redir", "=all", "https://e.com"}}},
		"wget":   {ok: [][]string{{"wget", "-q", "-O", "-", "https://e.com"}, {"wget", "-P", "dir", "https://e.com/x"}}, deny: map[string][]string{"outside the workspace": {"wget", "-P", f.out, "https://e.com"}}},
		"sleep":  {ok: [][]string{{"sleep", "0.1"}}, deny: map[string][]string{"unknown option": {"sleep", "-x"}}},
		"echo":   {ok: [][]string{{"echo", "-n", "--help", "$(id)", "a|b"}}},
		"date":   {ok: [][]string{{"date", "-u", "+%s"}, {"date", "-d", "yesterday"}, {"date", "--iso-8601=seconds"}}, deny: map[string][]string{"system clock": {"date", "--set=now"}}},
		"env":    {ok: [][]string{{"env"}, {"env", "-u", "X"}, {"env", "-i", "X=1", "ls"}}, deny: map[string][]string{"splits a string": {"env", "-S", "sh -c x"}, "LD_PRELOAD": {"env", "LD_PRELOAD=x.so", "ls"}}},
		"true":   {ok: [][]string{{"true"}, {"true", "--anything"}}},
		"false":  {ok: [][]string{{"false"}}},
		"printf": {ok: [][]string{{"printf", "%s\\n", "a", "b"}}},
		"yes":    {ok: [][]string{{"yes", "y"}}},
	}
	for tool, c := range tools {
		for _, a := range c.ok {
			d := f.decide(a, verdict.ModeTrusted)
			if d.Verdict == verdict.Deny {
				t.Errorf("%s: %q denied: %v", tool, a, d.Reasons)
			}
		}
		for why, a := range c.deny {
			d := f.decide(a, verdict.ModeTrusted)
			if unknownArgsReason(why) {
				// What the grammar does not read is unknown code, never a
				// hard deny (issue 31): without a sandbox, confirm mode asks.
				dc := f.decide(a, verdict.ModeConfirm)
				if d.Verdict == verdict.Deny || dc.Verdict != verdict.Ask || !hasReason(dc, why) || !hasReason(dc, "runs as unknown code") {
					t.Errorf("%s: %q: trusted %s, confirm %s, want unknown code (ask in confirm) with %q; reasons %v", tool, a, d.Verdict, dc.Verdict, why, dc.Reasons)
				}
				continue
			}
			if d.Verdict != verdict.Deny || !hasReason(d, why) {
				t.Errorf("%s: %q: %s, want deny with %q; reasons %v", tool, a, d.Verdict, why, d.Reasons)
			}
		}
	}
}

// unknownArgsReason: the grammar's reasons for not reading a command
// (an unknown option or subcommand, a missing value), which make it unknown
// code.
func unknownArgsReason(why string) bool {
	return why == "unknown option" || why == "needs a value" || strings.HasSuffix(why, "subcommand") || strings.HasPrefix(why, "unknown find")
}

func TestGrammarDetails(t *testing.T) {
	// GNU abbreviations, bundles, attached values and `--`
	p, _, err := toolspec.ParseCommand([]string{"sort", "--rev", "-nk2", "-ofile", "--", "-x"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Has("--reverse") || !p.Has("-n") || strings.Join(p.Values("-k"), ",") != "2" || strings.Join(p.Values("-o"), ",") != "file" {
		t.Fatalf("parsed %+v", p.Opts)
	}
	if len(p.Operands) != 1 || p.Operands[0].Value != "-x" || p.Operands[0].Kind != grammar.KPathRead {
		t.Fatalf("operands %+v", p.Operands)
	}
	if len(p.Paths) != 1 || p.Paths[0].Kind != grammar.KPathWrite {
		t.Fatalf("paths %+v", p.Paths)
	}
	if _, _, err := toolspec.ParseCommand([]string{"sort", "--ra"}); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Fatalf("ambiguous abbreviation accepted: %v", err)
	}
	// git: global vs subcommand options; -p differs by position
	p, _, _ = toolspec.ParseCommand([]string{"git", "log", "-p"})
	if p.Denied() || p.Subs[0] != "log" {
		t.Fatal("git log -p")
	}
	p, _, _ = toolspec.ParseCommand([]string{"git", "-p", "log"})
	if !p.Denied() {
		t.Fatal("git -p log")
	}
	// git -c<k>=<v> attached
	p, _, _ = toolspec.ParseCommand([]string{"git", "-ccore.pager=sh", "log"})
	if !p.Denied() {
		t.Fatal("git -c attached")
	}
	// operand kinds
	p, _, _ = toolspec.ParseCommand([]string{"grep", "-r", "pat", "a", "b"})
	if p.Operands[0].Kind != grammar.KPattern || p.Operands[1].Kind != grammar.KPathRead {
		t.Fatalf("grep kinds %+v", p.Operands)
	}
	p, _, _ = toolspec.ParseCommand([]string{"curl", "https://e.com"})
	if p.Operands[0].Kind != grammar.KURL || !p.Net {
		t.Fatalf("curl kinds %+v", p.Operands)
	}
	p, _, _ = toolspec.ParseCommand([]string{"cp", "a", "b", "c"})
	if p.Operands[0].Kind != grammar.KPathRead || p.Operands[2].Kind != grammar.KPathWrite {
		t.Fatalf("cp kinds %+v", p.Operands)
	}
	// go single-dash long options with = and separate values
	p, err = func() (*grammar.Parsed, error) {
		q, _, e := toolspec.ParseCommand([]string{"go", "test", "-run", "X", "-count=1", "-v=true", "./..."})
		return q, e
	}()
	if err != nil || strings.Join(p.Values("-run"), "") != "X" {
		t.Fatalf("go flags: %v %+v", err, p)
	}
}

// The engine names no tool: a tool's knowledge lives in its spec
// (unixtools, devtools) and the engine reaches it through the registry
// (toolspec). A string
// literal in an engine file that is a registered tool's name is a branch
// on that tool creeping back in.
func TestEngineNamesNoTool(t *testing.T) {
	engine := []string{"decide.go", "paths.go", "sandbox.go", "policy.go", "engine.go", "api.go", "toolspec/programs.go",
		"grammar/grammar.go", "grammar/util.go", "toolspec/paths.go", "toolspec/project.go", "toolspec/tool.go", "toolspec/context.go"}
	// "env" is also the explain step of the request's environment and the
	// policy file's env section; "true" and "false" are also option values
	// (-v=true).
	allowed := map[string]bool{"env": true, "true": true, "false": true}
	fset := token.NewFileSet()
	for _, name := range engine {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if _, imp := n.(*ast.ImportSpec); imp {
				return false
			}
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && toolspec.ToolNamed(s) != nil && !allowed[s] {
				t.Errorf("%s: the engine names the tool %q; put what it knows in the tool's spec", fset.Position(lit.Pos()), s)
			}
			return true
		})
	}
}
