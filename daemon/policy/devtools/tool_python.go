package devtools

import (
	"strings"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
)

// postPytest: pytest reads more arguments from an @FILE (past every check
// here), and runs the test files and directories it is given.
func postPytest(p *grammar.Parsed) {
	for i, op := range p.Operands {
		if strings.HasPrefix(op.Value, "@") {
			p.Deny(verdict.RiskHigh, "pytest %s: arguments read from a file are not checked; pass them on the command line", grammar.Clip(op.Value))
			continue
		}
		path, _, _ := strings.Cut(op.Value, "::")
		p.Operands[i] = grammar.Operand{Value: path, Kind: grammar.KPathRead}
	}
}

var _ = toolspec.Family(registerPython)

// registerPython: pytest (and py.test) and uv.
func registerPython() {
	R, W := grammar.KPathRead, grammar.KPathWrite
	pt := &grammar.CmdSpec{Code: true, Write: true, Operand: grammar.KOther, Post: postPytest, Opts: grammar.Opts(grammar.Flags("-x|--exitfirst -q|--quiet -v|--verbose -s -l|--showlocals --lf|--last-failed --ff|--failed-first --nf|--new-first --sw|--stepwise --co|--collect-only --disable-warnings --noconftest --strict-markers --no-header --no-summary --cache-clear --setup-show --fixtures -h|--help --version --runxfail"),
		grammar.List(grammar.O("-k="), grammar.O("-m="), grammar.O("--maxfail="), grammar.O("--capture="), grammar.O("--tb="), grammar.O("-r="), grammar.O("--durations="), grammar.O("-W|--pythonwarnings="), grammar.O("--junitxml|--junit-xml=", W), grammar.O("--rootdir=", R).MovesDir(), grammar.O("-c=", R), grammar.O("--confcutdir=", R), grammar.O("--ignore=", R), grammar.O("--deselect="), grammar.O("--import-mode="), grammar.O("--basetemp=", W), grammar.O("-n|--numprocesses="), grammar.O("--color="), grammar.O("--timeout="),
			grammar.O("--pdb").DenyWith("starts an interactive debugger"), grammar.O("--pdbcls=").DenyWith("loads a debugger class"), grammar.O("-p=").DenyWith("loads a plugin module chosen by the caller"), grammar.O("-o|--override-ini=").DenyWith("overrides configuration (addopts, plugins)")))}
	toolspec.Register("pytest", &toolspec.ToolSpec{Grammar: pt, Entry: &toolspec.EntryFiles{Names: []string{"conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"}, WalksUp: true}, Runs: []string{"git"}})
	toolspec.Register("py.test", &toolspec.ToolSpec{Grammar: pt, Runs: []string{"git"}})
	registerUv()
}

// registerUv: uv, the Python project manager. Its project commands resolve,
// build and install the project's packages: the build backends its
// pyproject.toml names run, and pyproject.toml and uv.toml choose indexes
// and interpreters, so every one of them runs project code, like cargo. uv
// run (any program in the project's environment) is a wrapper and has no
// grammar here: it is refused as an unknown subcommand.
func registerUv() {
	R, W := grammar.KPathRead, grammar.KPathWrite
	global := grammar.Opts(grammar.Flags("-q|--quiet -v|--verbose --offline -n|--no-cache --no-progress --native-tls --no-config --no-python-downloads -h|--help -V|--version"),
		grammar.List(grammar.O("--directory=", R).MovesDir(), grammar.O("--project=", R).MovesDir(), grammar.O("--cache-dir=", W), grammar.O("--color="), grammar.O("--python-preference="),
			grammar.O("-p|--python=").DenyWith("chooses the Python interpreter uv runs (any program)"), grammar.O("--config-file=").DenyWith(toolspec.WhyConfig)))
	project := func(name string, more ...*grammar.Opt) *grammar.CmdSpec {
		return &grammar.CmdSpec{Name: name, Inherit: true, Code: true, Net: true, Write: true,
			Opts: grammar.Opts(grammar.Flags("--frozen --locked --all-packages"), grammar.List(grammar.O("--package=")), more)}
	}
	toolspec.Register("uv", &toolspec.ToolSpec{
		Grammar: &grammar.CmdSpec{NeedSub: true, Opts: global, Subs: grammar.Subs(
			project("sync", grammar.Opts(grammar.Flags("--all-extras --no-dev --dev --no-install-project --inexact --exact --no-editable --dry-run --check"), grammar.List(grammar.O("--extra="), grammar.O("--group="), grammar.O("--only-group=")))...),
			project("lock", grammar.Opts(grammar.Flags("--check --check-exists --dry-run -U|--upgrade"), grammar.List(grammar.O("-P|--upgrade-package=")))...),
			project("tree", grammar.Opts(grammar.Flags("--invert --outdated --universal --no-dedupe"), grammar.List(grammar.O("-d|--depth="), grammar.O("--prune=")))...),
			project("build", grammar.Opts(grammar.Flags("--sdist --wheel"), grammar.List(grammar.O("-o|--out-dir=", W)))...),
		)},
		Entry: &toolspec.EntryFiles{Names: []string{"pyproject.toml", "uv.toml", "uv.lock"}, WalksUp: true, Chdir: "--directory", Dirs: uvProjectDirs},
		Runs:  []string{"git"}, // git dependencies
	})
}

// uvProjectDirs: --project names the project directory (uv itself stays
// where it was started).
func uvProjectDirs(pc *grammar.Parsed, dir string) []string {
	return toolspec.OptionFiles(pc, dir, "--project")
}
