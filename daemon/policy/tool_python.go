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

func registerPython() {
	R, W := KPathRead, KPathWrite
	pt := &cmdSpec{code: true, write: true, operand: KOther, post: postPytest, opts: opts(flags("-x|--exitfirst -q|--quiet -v|--verbose -s -l|--showlocals --lf|--last-failed --ff|--failed-first --nf|--new-first --sw|--stepwise --co|--collect-only --disable-warnings --noconftest --strict-markers --no-header --no-summary --cache-clear --setup-show --fixtures -h|--help --version --runxfail"),
		list(o("-k="), o("-m="), o("--maxfail="), o("--capture="), o("--tb="), o("-r="), o("--durations="), o("-W|--pythonwarnings="), o("--junitxml|--junit-xml=", W), o("--rootdir=", R).movesDir(), o("-c=", R), o("--confcutdir=", R), o("--ignore=", R), o("--deselect="), o("--import-mode="), o("--basetemp=", W), o("-n|--numprocesses="), o("--color="), o("--timeout="),
			o("--pdb").denyWith("starts an interactive debugger"), o("--pdbcls=").denyWith("loads a debugger class"), o("-p=").denyWith("loads a plugin module chosen by the caller"), o("-o|--override-ini=").denyWith("overrides configuration (addopts, plugins)")))}
	register("pytest", &toolSpec{grammar: pt, entry: &entryFiles{names: []string{"conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"}, walksUp: true}, runs: []string{"git"}})
	register("py.test", &toolSpec{grammar: pt, runs: []string{"git"}})
}
