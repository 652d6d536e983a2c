package policy

import (
	"strings"
)

// postPytest: pytest reads more arguments from an @FILE (past every check
// here), and runs the test files and directories it is given.
func postPytest(p *parsed) {
	for i, op := range p.operands {
		if strings.HasPrefix(op.value, "@") {
			p.deny(RiskHigh, "pytest %s: arguments read from a file are not checked; pass them on the command line", clip(op.value))
			continue
		}
		path, _, _ := strings.Cut(op.value, "::")
		p.operands[i] = operand{value: path, kind: KPathRead}
	}
}

var _ = family(registerPython)

// registerPython: pytest (and py.test) and uv.
func registerPython() {
	R, W := KPathRead, KPathWrite
	pt := &cmdSpec{code: true, write: true, operand: KOther, post: postPytest, opts: opts(flags("-x|--exitfirst -q|--quiet -v|--verbose -s -l|--showlocals --lf|--last-failed --ff|--failed-first --nf|--new-first --sw|--stepwise --co|--collect-only --disable-warnings --noconftest --strict-markers --no-header --no-summary --cache-clear --setup-show --fixtures -h|--help --version --runxfail"),
		list(o("-k="), o("-m="), o("--maxfail="), o("--capture="), o("--tb="), o("-r="), o("--durations="), o("-W|--pythonwarnings="), o("--junitxml|--junit-xml=", W), o("--rootdir=", R).movesDir(), o("-c=", R), o("--confcutdir=", R), o("--ignore=", R), o("--deselect="), o("--import-mode="), o("--basetemp=", W), o("-n|--numprocesses="), o("--color="), o("--timeout="),
			o("--pdb").denyWith("starts an interactive debugger"), o("--pdbcls=").denyWith("loads a debugger class"), o("-p=").denyWith("loads a plugin module chosen by the caller"), o("-o|--override-ini=").denyWith("overrides configuration (addopts, plugins)")))}
	register("pytest", &toolSpec{grammar: pt, entry: &entryFiles{names: []string{"conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"}, walksUp: true}, runs: []string{"git"}})
	register("py.test", &toolSpec{grammar: pt, runs: []string{"git"}})
	registerUv()
}

// registerUv: uv, the Python project manager. Its project commands resolve,
// build and install the project's packages: the build backends its
// pyproject.toml names run, and pyproject.toml and uv.toml choose indexes
// and interpreters, so every one of them runs project code, like cargo. uv
// run (any program in the project's environment) is a wrapper and has no
// grammar here: it is refused as an unknown subcommand.
func registerUv() {
	R, W := KPathRead, KPathWrite
	global := opts(flags("-q|--quiet -v|--verbose --offline -n|--no-cache --no-progress --native-tls --no-config --no-python-downloads -h|--help -V|--version"),
		list(o("--directory=", R).movesDir(), o("--project=", R).movesDir(), o("--cache-dir=", W), o("--color="), o("--python-preference="),
			o("-p|--python=").denyWith("chooses the Python interpreter uv runs (any program)"), o("--config-file=").denyWith(whyConfig)))
	project := func(name string, more ...*opt) *cmdSpec {
		return &cmdSpec{name: name, inherit: true, code: true, net: true, write: true,
			opts: opts(flags("--frozen --locked --all-packages"), list(o("--package=")), more)}
	}
	register("uv", &toolSpec{
		grammar: &cmdSpec{needSub: true, opts: global, subs: subs(
			project("sync", opts(flags("--all-extras --no-dev --dev --no-install-project --inexact --exact --no-editable --dry-run --check"), list(o("--extra="), o("--group="), o("--only-group=")))...),
			project("lock", opts(flags("--check --check-exists --dry-run -U|--upgrade"), list(o("-P|--upgrade-package=")))...),
			project("tree", opts(flags("--invert --outdated --universal --no-dedupe"), list(o("-d|--depth="), o("--prune=")))...),
			project("build", opts(flags("--sdist --wheel"), list(o("-o|--out-dir=", W)))...),
		)},
		entry: &entryFiles{names: []string{"pyproject.toml", "uv.toml", "uv.lock"}, walksUp: true, chdir: "--directory", dirs: uvProjectDirs},
		runs:  []string{"git"}, // git dependencies
	})
}

// uvProjectDirs: --project names the project directory (uv itself stays
// where it was started).
func uvProjectDirs(pc *parsed, dir string) []string { return optionFiles(pc, dir, "--project") }
