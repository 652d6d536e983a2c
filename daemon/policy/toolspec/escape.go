package toolspec

import (
	"regexp"
	"strings"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/internal/cmdline"
)

var shells = grammar.Set("sh bash dash zsh ksh ksh93 mksh pdksh oksh fish csh tcsh ash rbash yash elvish nu xonsh pwsh powershell rc es")
var interpreters = grammar.Set("python python2 python3 pypy pypy3 node nodejs deno bun perl perl5 ruby irb php lua luajit tclsh wish expect Rscript R julia osascript jshell java groovy scala ghci runghc runhaskell guile racket sbcl clisp ocaml swift dotnet qjs jjs rhino gdb lldb")
var pythonRE = regexp.MustCompile(`^(python|pypy)[0-9.]*m?$|^(perl|ruby|php|lua|node)[0-9.]+$`)
var wrappers = grammar.Set("timeout nice nohup setsid stdbuf xargs watch flock script busybox toybox chroot unshare nsenter ionice chrt taskset time command builtin exec eval strace ltrace valgrind firejail bwrap systemd-run at batch parallel entr unbuffer rlwrap faketime catchsegv cgexec prlimit numactl torsocks proxychains proxychains4 dbus-launch dbus-run-session ssh setpriv setarch linux32 linux64 sg newgrp chronic ifne vipe xdg-open open env-exec nix-shell direnv fakeroot schroot systemd-nspawn docker podman kubectl tmux screen expect")

// scriptInterpreters run a script file given as their first argument.
var scriptInterpreters = grammar.Set("sh bash dash zsh ksh node nodejs perl ruby php lua bun")

// RunsScripts: base runs a script file given as its first argument.
func RunsScripts(base string) bool { return scriptInterpreters[base] || pythonRE.MatchString(base) }

var privilege = grammar.Set("sudo su doas pkexec run0 sudoedit runuser machinectl calife ksu")

// EscapeClass names the escape class of a program base name, or "".
func EscapeClass(base string) string {
	switch {
	case shells[base]:
		return "shell"
	case interpreters[base] || pythonRE.MatchString(base):
		return "interpreter"
	case privilege[base]:
		return "privilege escalation"
	case wrappers[base] || base == "env":
		return "program-running wrapper"
	}
	return ""
}

// Why the kept hard denials are dangerous even inside a fully enforced
// sandbox (docs/POLICY.md, "What is denied and why").
const (
	whyShell = ": denied even inside the sandbox, because the string is code the policy cannot read, so neither the policy nor a person approving it can tell what it runs; " +
		"put the commands in a script in the workspace and run it by its path (project code), or send each command as argv"
	whyInline = ": denied even inside the sandbox, because the code is a string the policy cannot read and leaves no file an approval can bind; " +
		"write it to a file in the workspace and run the interpreter on that file (project code)"
	whyInterpreter = ": denied even inside the sandbox, because what it would run is neither a workspace file an approval can bind nor a form the policy reads " +
		"(a workspace script, -m MODULE, node --test and --version are decided)"
	whyPrivilege = ": denied even inside the sandbox, whose point is that a command runs as the principal that asked, with no way to gain privileges; " +
		"an operator gives a command another user with a rule's run_as"
	whyWrapper = "; termd does not follow what it runs this way (timeout, env, nice, nohup, time and xargs are decided as the command they run): send the command itself"
)

// remoteWhy: wrappers that run commands somewhere no sandbox here reaches.
var remoteWhy = map[string]string{
	"docker":  "talks to the container engine, which starts containers as host root outside termd's sandbox (a container can mount the host's files): denied even inside the sandbox (privilege escalation through a container socket)",
	"podman":  "starts containers outside termd's sandbox (as root, a container can mount the host's files): denied even inside the sandbox (privilege escalation through a container engine)",
	"kubectl": "runs commands in a cluster, outside this sandbox and its receipts, with the principal's credentials: denied even inside the sandbox",
	"ssh":     "runs commands on another machine, outside this sandbox and its receipts, with the principal's keys: denied even inside the sandbox (program-running wrapper)",
}

// wrapper options that take a value (so the value is not the command).
var wrapperValueOpts = map[string]string{
	"timeout":     "-s --signal -k --kill-after",
	"nice":        "-n --adjustment",
	"stdbuf":      "-i -o -e --input --output --error",
	"xargs":       "-I -i -n -P -d -a -E -e -s -L -l --max-args --max-procs --delimiter --arg-file --eof --max-chars --max-lines --replace --process-slot-var",
	"watch":       "-n --interval -d --differences -q --equexit",
	"flock":       "-w --timeout -E --conflict-exit-code -c --command",
	"script":      "-c --command -E --echo -I --log-in -O --log-out -B --log-io -T --log-timing -m --logging-format",
	"sudo":        "-u --user -g --group -C --close-from -D --chdir -h --host -p --prompt -R --chroot -r --role -t --type -U --other-user -T --command-timeout",
	"doas":        "-u -C",
	"su":          "-c --command -s --shell -g --group -G --supp-group -w --whitelist-environment",
	"runuser":     "-u --user -c --command -s --shell -g --group -G --supp-group -w",
	"pkexec":      "--user -u",
	"env":         "-u --unset -C --chdir -S --split-string",
	"ionice":      "-c --class -n --classdata -p --pid -P --pgid -u --uid",
	"chrt":        "-T -P -D",
	"taskset":     "-p --pid",
	"ssh":         "-b -c -D -E -e -F -I -i -J -L -l -m -O -o -p -Q -R -S -W -w -B",
	"unshare":     "--map-user --map-group --setuid --setgid --root --wd",
	"nsenter":     "-t --target -S --setuid -G --setgid --root --wd",
	"prlimit":     "-p --pid",
	"setpriv":     "--reuid --regid --groups --inh-caps --ambient-caps --bounding-set --securebits --selinux-label --apparmor-profile",
	"systemd-run": "-p --property -u --unit --uid --gid -E --setenv --working-directory --description --slice -M --machine --host",
	"strace":      "-o -e -p -s -u -E -I -b -O -X -P -a",
	"ltrace":      "-o -e -p -s -u -a -A -D -F -l -n",
	"parallel":    "-j --jobs -S --sshlogin -a --arg-file --colsep -d --delimiter -I -n -N -L --timeout --joblog",
	"tmux":        "-L -S -f -c -T",
	"time":        "-f --format -o --output",
	"faketime":    "-m -f",
}

// positional arguments (after options) that come before the command.
var wrapperPositional = map[string]int{"timeout": 1, "chroot": 1, "taskset": 1, "chrt": 1, "sg": 1, "flock": 1, "ssh": 1, "faketime": 1, "setarch": 1, "cgexec": 0}

// EscapeInner reports whether argv (an escape-class program) is an escape
// and, where it can be found, the command it would run.
func EscapeInner(base string, argv []string) ([]string, bool, string) {
	args := argv[1:]
	class := EscapeClass(base)
	switch class {
	case "shell":
		for i := 0; i < len(args); i++ {
			a := args[i]
			if a == "--" {
				break
			}
			if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "c") || a == "--command" {
				if i+1 < len(args) {
					str := args[i+1]
					inner, err := cmdline.Split(str)
					why := base + " -c runs a shell command string (shell escape; send argv instead)" + whyShell
					if err != nil {
						why += ": " + err.Error()
						return nil, true, why
					}
					return inner, true, why
				}
				return nil, true, base + " -c runs a shell command string (shell escape; send argv instead)" + whyShell
			}
			if !strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "+") {
				break
			}
		}
		return nil, true, base + " runs shell scripts or commands (shell escape; send argv instead)" + whyShell
	case "interpreter":
		for _, a := range args {
			if a == "-c" || a == "-e" || a == "-E" || a == "--eval" || a == "-p" || a == "--print" || a == "-r" || a == "-x" || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.ContainsAny(a[1:], "ce")) {
				return nil, true, base + " " + a + " runs inline code (interpreter escape)" + whyInline
			}
		}
		return nil, true, base + " runs a program in an interpreter (interpreter escape)" + whyInterpreter
	case "privilege escalation":
		inner := wrapperCommand(base, args)
		return inner, true, base + " changes user or privileges (privilege escalation)" + whyPrivilege
	case "program-running wrapper":
		inner := wrapperCommand(base, args)
		if base == "env" {
			if inner == nil {
				for _, a := range args {
					if a == "-S" || strings.HasPrefix(a, "-S") || strings.HasPrefix(a, "--split-string") {
						return nil, true, "env -S splits a string into a command (program-running wrapper)"
					}
				}
				return nil, false, ""
			}
		}
		if base == "busybox" || base == "toybox" {
			return inner, true, base + " runs applets, including shells (program-running wrapper)"
		}
		if why := remoteWhy[base]; why != "" {
			return inner, true, base + " " + why
		}
		return inner, true, base + " runs another program (program-running wrapper)" + whyWrapper
	}
	return nil, false, ""
}

// wrapperCommand finds the command a wrapper would run, or nil.
func wrapperCommand(base string, args []string) []string {
	valued := grammar.Set(wrapperValueOpts[base])
	i := 0
	for i < len(args) {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		if (base == "su" || base == "runuser" || base == "flock" || base == "script") && (a == "-c" || a == "--command") && i+1 < len(args) {
			if w, err := cmdline.Split(args[i+1]); err == nil {
				return w
			}
			return []string{"sh", "-c", args[i+1]}
		}
		name, _, hasEq := strings.Cut(a, "=")
		i++
		if valued[name] && !hasEq {
			i++
		}
	}
	if base == "env" {
		for i < len(args) && strings.Contains(args[i], "=") && !strings.HasPrefix(args[i], "=") {
			i++
		}
	}
	i += wrapperPositional[base]
	if i >= len(args) {
		return nil
	}
	rest := args[i:]
	if base == "watch" && len(rest) == 1 {
		if w, err := cmdline.Split(rest[0]); err == nil {
			return w
		}
	}
	return rest
}

// transparentWrappers run one command and change nothing the policy looks
// at (a time limit, a priority, the timing, hang-ups, environment
// assignments the env policy checks, arguments read from the input): the
// command they run is decided as itself (unwrapCommand).
var transparentWrappers = grammar.Set("timeout nice nohup time env xargs")

// Wrapped is a transparent wrapper's command line, split.
type Wrapped struct {
	Prefix []string          // the wrapper's own arguments, argv[0] included
	Inner  []string          // the command it runs
	Env    map[string]string // env NAME=VALUE assignments
	Chdir  string            // env -C DIR
	Reads  []string          // xargs -a FILE
	Writes []string          // time -o FILE
	// StdinArgs: xargs adds arguments it reads from its input.
	StdinArgs bool
	// EnvLast: the command's forced environment goes last in the
	// wrapper's argv (env -i and -u would drop it otherwise).
	EnvLast bool
}

var durationRE = regexp.MustCompile(`^[0-9]+(\.[0-9]*)?[smhd]?$`)

// wrapperOpts are a transparent wrapper's options: "name" takes no value,
// "name=" takes one (separate or attached), "name?" only an attached one.
var wrapperOpts = map[string][]string{
	"timeout": {"--preserve-status", "--foreground", "-v", "--verbose", "-s=", "--signal=", "-k=", "--kill-after="},
	"nice":    {"-n=", "--adjustment="},
	"nohup":   {},
	"time":    {"-p", "--portability", "-v", "--verbose", "-q", "--quiet", "-a", "--append", "-f=", "--format=", "-o=", "--output="},
	"env":     {"-i", "--ignore-environment", "-u=", "--unset=", "-C=", "--chdir=", "-v", "--debug"},
	"xargs": {"-0", "--null", "-r", "--no-run-if-empty", "-t", "--verbose", "-x", "--exit", "-I=", "-i?", "--replace?", "-n=", "--max-args=", "-P=", "--max-procs=",
		"-d=", "--delimiter=", "-a=", "--arg-file=", "-E=", "-e?", "--eof?", "-s=", "--max-chars=", "-L=", "--max-lines=", "-l?", "--process-slot-var="},
}

// UnwrapCommand splits a transparent wrapper's argv, or returns nil when it
// is not one or its arguments are not all understood.
func UnwrapCommand(base string, argv []string) *Wrapped {
	if !transparentWrappers[base] {
		return nil
	}
	known := map[string]byte{}
	for _, o := range wrapperOpts[base] {
		switch {
		case strings.HasSuffix(o, "="):
			known[strings.TrimSuffix(o, "=")] = '='
		case strings.HasSuffix(o, "?"):
			known[strings.TrimSuffix(o, "?")] = '?'
		default:
			known[o] = ' '
		}
	}
	w := &Wrapped{Env: map[string]string{}, StdinArgs: base == "xargs", EnvLast: base == "env"}
	args := argv[1:]
	i := 0
	value := func(name, v string) bool {
		switch name {
		case "-C", "--chdir":
			w.Chdir = v
		case "-a", "--arg-file":
			w.Reads = append(w.Reads, v)
		case "-o", "--output":
			w.Writes = append(w.Writes, v)
		case "-n", "--adjustment":
			if base == "nice" && strings.HasPrefix(v, "-") {
				return false // raising the priority needs privilege
			}
		}
		return true
	}
options:
	for i < len(args) {
		a := args[i]
		switch {
		case a == "--":
			i++
			break options
		case !strings.HasPrefix(a, "-") || a == "-":
			break options
		case base == "nice" && grammar.IsDigits(a[1:]):
			i++ // nice -10: an adjustment
			continue
		}
		name, val, hasEq := strings.Cut(a, "=")
		kind, ok := known[name]
		if !ok && !strings.HasPrefix(a, "--") && len(a) > 2 {
			// an attached short value: -k5, -n10, -I{}
			name, val, hasEq = a[:2], a[2:], true
			kind, ok = known[name]
		}
		if !ok {
			return nil
		}
		i++
		switch kind {
		case ' ':
			if hasEq {
				return nil
			}
		case '?':
			if hasEq && !value(name, val) {
				return nil
			}
		case '=':
			if !hasEq {
				if i >= len(args) {
					return nil
				}
				val = args[i]
				i++
			}
			if !value(name, val) {
				return nil
			}
		}
	}
	if base == "env" {
		for i < len(args) && strings.Contains(args[i], "=") && !strings.HasPrefix(args[i], "=") {
			k, v, _ := strings.Cut(args[i], "=")
			w.Env[k] = v
			i++
		}
	}
	if base == "timeout" {
		if i >= len(args) || !durationRE.MatchString(args[i]) {
			return nil
		}
		i++
	}
	if i >= len(args) {
		return nil
	}
	w.Prefix = append([]string{argv[0]}, args[:i]...)
	w.Inner = args[i:]
	return w
}

// BuiltinForm maps the shell builtins agents use to look programs up
// (`command -v X`, `type X`) to which, and `time CMD` where no time program
// is installed to CMD itself (the receipt records how long it ran). ifMissing:
// only when argv[0] is not in the trusted PATH.
func BuiltinForm(argv []string) (sub []string, why string, ifMissing bool) {
	base := grammar.BaseName(argv[0])
	switch base {
	case "command":
		if len(argv) >= 3 && (argv[1] == "-v" || argv[1] == "-V") && !strings.HasPrefix(argv[2], "-") {
			return append([]string{"which"}, argv[2:]...), "command " + argv[1] + " is a shell builtin: termd answers it with which", false
		}
	case "type":
		rest := argv[1:]
		all := false
		for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
			switch rest[0] {
			case "-a":
				all = true
			case "-p", "-P", "-f":
			default:
				return nil, "", false
			}
			rest = rest[1:]
		}
		if len(rest) == 0 {
			return nil, "", false
		}
		sub = []string{"which"}
		if all {
			sub = append(sub, "-a")
		}
		return append(sub, rest...), "type is a shell builtin: termd answers it with which", false
	case "time":
		w := UnwrapCommand(base, argv)
		if w != nil && len(w.Prefix) == 1 {
			return w.Inner, "time is a shell keyword and no time program is installed: the command runs by itself (the receipt records how long it ran)", true
		}
	}
	return nil, "", false
}
