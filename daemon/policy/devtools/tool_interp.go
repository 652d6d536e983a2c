package devtools

import (
	"strings"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
)

// What an interpreter is asked to do, when it is neither inline code nor a
// REPL: print its version, or run the project's own code through a module
// or a test runner (python3 -m pytest, node --test). Inline code (-c, -e)
// and unknown forms stay interpreter escapes.

// interpreterInfoArgs are the arguments with which an interpreter only
// prints its version or help, by family.
var interpreterInfoArgs = map[string]map[string]bool{
	"python": grammar.Set("-V -VV --version -h --help"),
	"node":   grammar.Set("-v --version -h --help"),
	"perl":   grammar.Set("-v --version"),
	"ruby":   grammar.Set("--version -h --help"),
	"php":    grammar.Set("-v --version -h --help"),
	"lua":    grammar.Set("-v"),
	"bun":    grammar.Set("-v --version -h --help"),
	"deno":   grammar.Set("-V --version -h --help"),
}

// interpreterFamily names an interpreter's family (python3.12 is python).
func interpreterFamily(base string) string {
	switch {
	case strings.HasPrefix(base, "python") || strings.HasPrefix(base, "pypy"):
		return "python"
	case base == "node" || base == "nodejs" || strings.HasPrefix(base, "node"):
		return "node"
	case strings.HasPrefix(base, "perl"):
		return "perl"
	case strings.HasPrefix(base, "ruby"):
		return "ruby"
	case strings.HasPrefix(base, "php"):
		return "php"
	case strings.HasPrefix(base, "lua"):
		return "lua"
	}
	return base
}

// InterpreterInfo: argv only asks the interpreter for its version or help
// (python3 --version, node -v); no code runs.
func InterpreterInfo(base string, argv []string) bool {
	if len(argv) != 2 {
		return false
	}
	return interpreterInfoArgs[interpreterFamily(base)][argv[1]]
}

// Python options that take no value and change nothing a policy looks at,
// and the ones that take one (-W ignore, -X dev).
var (
	pythonFlags  = grammar.Set("-B -u -O -OO -s -S -E -I -P -q -b -bb -d -v")
	pythonValued = grammar.Set("-W -X")
)

// pythonNetModules reach a package index (pip install, pip download).
var pythonNetSubs = grammar.Set("install download wheel index search")

// InterpreterProject is the project code an interpreter runs through a
// module or test runner (python3 -m pytest, python3 -m venv .venv, node
// --test tests), or nil. Such a run imports the workspace's code (python
// looks for the module in the working directory first), so it is project
// code: confined by an enforced sandbox, asked otherwise.
func InterpreterProject(base string, argv []string) *toolspec.ProjectCode {
	switch interpreterFamily(base) {
	case "python":
		return pythonModule(base, argv[1:])
	case "node":
		return nodeTest(base, argv[1:])
	}
	return nil
}

func pythonModule(base string, args []string) *toolspec.ProjectCode {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case pythonFlags[a]:
		case pythonValued[a] && i+1 < len(args):
			i++
		case len(a) > 2 && pythonValued[a[:2]]:
		case a == "-m" && i+1 < len(args) || strings.HasPrefix(a, "-m") && len(a) > 2:
			mod, rest := strings.TrimPrefix(a, "-m"), args[i+1:]
			if mod == "" {
				mod, rest = args[i+1], args[i+2:]
			}
			if mod == "" || strings.HasPrefix(mod, "-") {
				return nil
			}
			pc := &toolspec.ProjectCode{Module: mod, Why: "runs project code: " + base + " -m " + mod + " imports the module (looked up in the working directory first) and the project's code; its arguments are not analysed"}
			if root, _, _ := strings.Cut(mod, "."); root == "pip" && len(rest) > 0 && pythonNetSubs[firstWord(rest)] {
				pc.Net = true
				pc.Why = "runs project code and uses the network: " + base + " -m pip " + firstWord(rest) + " downloads packages from an index and runs their build code"
			}
			if mod == "pytest" || mod == "py.test" {
				pc.EntryTool = "pytest"
			}
			return pc
		default:
			return nil // inline code (-c), a script (handled before), or an option not read here
		}
	}
	return nil
}

// firstWord is the first argument that is not an option.
func firstWord(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// nodeInline are node's options that take code or start a REPL.
var nodeInline = grammar.Set("-e --eval -p --print -i --interactive -c --check")

// nodeTest reads `node [--options] --test [--options] [files/dirs]`: node's
// test runner runs the project's test files. The files and directories
// named are checked as reads.
func nodeTest(base string, args []string) *toolspec.ProjectCode {
	test := false
	var reads []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasVal := strings.Cut(a, "=")
		switch {
		case a == "--test":
			test = true
		case nodeInline[name]:
			return nil
		case name == "--test-reporter-destination" && hasVal:
			if v := a[len(name)+1:]; v != "stdout" && v != "stderr" {
				return nil // a file the runner writes
			}
		case (a == "-r" || a == "--require" || a == "--import") && i+1 < len(args):
			i++ // a module loaded first: project code like the tests
		case strings.HasPrefix(a, "--"):
			// --test-name-pattern=, --test-reporter=, --experimental-*, ...
		case a == "-" || strings.HasPrefix(a, "-"):
			return nil
		default:
			reads = append(reads, a)
		}
	}
	if !test {
		return nil
	}
	return &toolspec.ProjectCode{Reads: reads, Why: "runs project code: " + base + " --test runs the project's test files; its options are not analysed"}
}
