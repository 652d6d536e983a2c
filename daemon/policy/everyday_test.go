package policy

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/verdict"
)

// Issue 31, "Nothing ordinary is hard-denied": every command an agent sends
// in an ordinary day is allowed or asked, never denied, bare and by its
// absolute path, with the sandbox fully enforced and without it. want is
// the verdict in confirm mode under the enforced sandbox: asks only for
// what rewrites history, discards work, removes files or uses the network.
func TestEverydayCommandsNotDenied(t *testing.T) {
	f := newFixture(t)
	enforced := f.ctx
	enforced.Sandbox, enforced.SandboxBy = true, "Landlock"
	cases := []struct {
		cmd  string
		want verdict.Verdict
	}{
		{"git stash", verdict.Allow}, {"git stash push -m wip", verdict.Allow}, {"git stash pop", verdict.Allow}, {"git stash list", verdict.Allow}, {"git stash show -p", verdict.Allow},
		{"git reset --soft HEAD~1", verdict.Allow}, {"git reset HEAD~1", verdict.Allow}, {"git reset --mixed HEAD", verdict.Allow}, {"git reset --hard", verdict.Ask}, {"git reset --hard HEAD~1", verdict.Ask},
		{"git merge feature", verdict.Allow}, {"git merge --no-ff -m msg feature", verdict.Allow}, {"git rebase main", verdict.Ask}, {"git rebase -i HEAD~3", verdict.Ask},
		{"git cherry-pick abc123", verdict.Allow}, {"git revert --no-edit abc123", verdict.Allow}, {"git tag", verdict.Allow}, {"git tag v1.0", verdict.Allow}, {"git tag -a v1.0 -m release", verdict.Allow},
		{"git clean -fd", verdict.Ask}, {"git clean -n", verdict.Allow}, {"git apply fix.patch", verdict.Ask}, {"git apply --check fix.patch", verdict.Allow},
		{"git remote -v", verdict.Allow}, {"git remote", verdict.Allow}, {"git describe --tags --always", verdict.Allow}, {"git worktree list", verdict.Allow}, {"git shortlog -sn", verdict.Allow},
		{"git reflog", verdict.Allow}, {"git blame README.md", verdict.Allow}, {"git bisect start", verdict.Ask}, {"git bisect good", verdict.Ask}, {"git --version", verdict.Allow},
		{"node --version", verdict.Allow}, {"node -v", verdict.Allow}, {"python3 --version", verdict.Allow}, {"python3 -V", verdict.Allow},
		{"node --test src", verdict.Allow}, {"node --test", verdict.Allow}, {"python3 -m pytest", verdict.Allow}, {"python3 -m pytest -x tests", verdict.Allow}, {"python3 -m venv .venv", verdict.Allow},
		{"python3 -m pip install requests", verdict.Ask}, {"python3 -m pip list", verdict.Allow},
		{"npm --version", verdict.Allow}, {"npm test --prefix web", verdict.Allow},
		{"timeout 10 go test ./...", verdict.Allow}, {"timeout -s KILL 5 git status", verdict.Allow}, {"env PORT=9000 go run .", verdict.Allow}, {"env NODE_ENV=test npm test", verdict.Allow},
		{"env FOO=1 true", verdict.Ask}, {"xargs grep foo", verdict.Allow}, {"xargs -0 rm", verdict.Ask}, {"nice make", verdict.Allow}, {"nice -n 10 go build ./...", verdict.Allow},
		{"time go build ./...", verdict.Allow}, {"time -p git status", verdict.Allow}, {"nohup go test ./...", verdict.Allow},
		{"command -v git", verdict.Allow}, {"type git", verdict.Allow}, {"type -a go", verdict.Allow},
		{"npm exec eslint .", verdict.Ask}, {"pnpm dlx create-vite", verdict.Ask},
		{"git branch feature", verdict.Allow}, {"git branch -D feature", verdict.Ask}, {"git switch -c fix", verdict.Allow}, {"git switch main", verdict.Allow}, {"git switch --discard-changes main", verdict.Ask},
		{"git checkout -b feature", verdict.Allow}, {"git checkout -b fix origin/main", verdict.Allow}, {"git checkout main", verdict.Ask}, {"git checkout -- README.md", verdict.Ask},
		{"git log --frobnicate", verdict.Allow}, {"git frobnicate", verdict.Allow}, {"ls --frobnicate", verdict.Allow},
	}
	// A virtual environment's interpreter links to the trusted one (a
	// regular file here: the fixture's programs are links to true).
	if err := os.MkdirAll(f.ws+"/.venv/bin", 0o755); err != nil {
		t.Fatal(err)
	}
	trueBin, err := os.ReadFile("/usr/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.bin+"/python3.99", trueBin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.bin+"/python3.99", f.ws+"/.venv/bin/python"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cmd  string
		want verdict.Verdict
	}{{".venv/bin/python -m pytest", verdict.Allow}, {".venv/bin/python --version", verdict.Allow}, {"./.venv/bin/python x.py", verdict.Allow}, {f.ws + "/.venv/bin/python -m pip install -r requirements.txt", verdict.Ask}} {
		argv := strings.Fields(c.cmd)
		d := f.pol.Decide(decision.Request{Argv: argv, Cwd: f.ws, Mode: verdict.ModeConfirm}, enforced)
		if d.Verdict != c.want || len(d.ExecArgv) == 0 || d.ExecArgv[0] != argv[0] {
			t.Errorf("%q: %s exec %q, want %s run by its workspace path; reasons %q", argv, d.Verdict, d.ExecArgv, c.want, d.Reasons)
		}
	}
	// Programs the project installed in node_modules/.bin and .venv/bin are
	// project code.
	mustWrite(t, f.ws+"/node_modules/eslint/bin/eslint.js", "#!/usr/bin/env node\n")
	mustWrite(t, f.ws+"/.venv/bin/pytest", "#!"+f.ws+"/.venv/bin/python\n")
	for _, p := range []string{f.ws + "/node_modules/eslint/bin/eslint.js", f.ws + "/.venv/bin/pytest"} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(f.ws+"/node_modules/.bin", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../eslint/bin/eslint.js", f.ws+"/node_modules/.bin/eslint"); err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{{"./node_modules/.bin/eslint", "."}, {"node_modules/.bin/eslint", "src"}, {f.ws + "/node_modules/.bin/eslint", "."}, {".venv/bin/pytest", "-x"}} {
		for name, ctx := range map[string]decision.Context{"sandbox-enforced": enforced, "sandbox-unavailable": f.ctx} {
			d := f.pol.Decide(decision.Request{Argv: argv, Cwd: f.ws, Mode: verdict.ModeConfirm}, ctx)
			if d.Verdict == verdict.Deny || !d.RunsProjectCode || ctx.Sandbox && d.Verdict != verdict.Allow {
				t.Errorf("%s %q: %s (project code %t), want project code (confined or asked); reasons %q", name, argv, d.Verdict, d.RunsProjectCode, d.Reasons)
			}
		}
	}
	if d := f.pol.Decide(decision.Request{Argv: []string{".venv/bin/python", "-c", "print(1)"}, Cwd: f.ws, Mode: verdict.ModeConfirm}, enforced); d.Verdict != verdict.Deny || !hasReason(d, "inline code") {
		t.Errorf(".venv/bin/python -c: %s %q", d.Verdict, d.Reasons)
	}
	for _, c := range cases {
		argv := strings.Fields(c.cmd)
		abs := append([]string{f.bin + "/" + argv[0]}, argv[1:]...)
		for _, a := range [][]string{argv, abs} {
			for name, ctx := range map[string]decision.Context{"sandbox-enforced": enforced, "sandbox-unavailable": f.ctx} {
				d := f.pol.Decide(decision.Request{Argv: a, Cwd: f.ws, Mode: verdict.ModeConfirm}, ctx)
				if d.Verdict == verdict.Deny {
					t.Errorf("%s %q: denied: %q", name, a, d.Reasons)
					continue
				}
				if name == "sandbox-enforced" && d.Verdict != c.want {
					t.Errorf("%s %q: %s, want %s; reasons %q", name, a, d.Verdict, c.want, d.Reasons)
				}
			}
		}
	}
}

// What a transparent wrapper runs is decided as itself and runs by the path
// the trusted PATH resolves, with the inner program's mandatory arguments
// and environment; env's assignments are checked against the env policy and
// the inner program's forced environment comes after them (env -i or -u
// cannot drop it).
func TestWrapperDecidedAsItsCommand(t *testing.T) {
	f := newFixture(t)
	d := f.decide([]string{"timeout", "10", "git", "status"}, verdict.ModeConfirm)
	if d.Verdict != verdict.Allow || len(d.ExecArgv) < 4 || d.ExecArgv[0] != "timeout" || d.ExecArgv[2] != f.bin+"/git" || !grammar.Contains(d.ExecArgv, "core.hooksPath=/dev/null") {
		t.Errorf("timeout 10 git status: %s exec %q; reasons %q", d.Verdict, d.ExecArgv, d.Reasons)
	}
	if d.ExecEnv["GIT_CONFIG_NOSYSTEM"] != "1" || !grammar.Contains(d.Rules, "git.read") || !strings.HasSuffix(d.ResolvedPath, "/true") {
		t.Errorf("timeout 10 git status: env %v rules %v path %s", d.ExecEnv, d.Rules, d.ResolvedPath)
	}
	d = f.decide([]string{"env", "-i", "git", "log"}, verdict.ModeConfirm)
	if i := slices.Index(d.ExecArgv, "GIT_CONFIG_NOSYSTEM=1"); d.Verdict != verdict.Allow || i < 0 || i > slices.Index(d.ExecArgv, f.bin+"/git") {
		t.Errorf("env -i git log: %s exec %q", d.Verdict, d.ExecArgv)
	}
	for argv, why := range map[string]string{
		"env LD_PRELOAD=/tmp/x.so ls":              "loader",
		"env GIT_CONFIG_GLOBAL=/tmp/x git log":     "GIT_CONFIG",
		"timeout 5 bash -c id":                     "even inside the sandbox",
		"nice -n -5 ls":                            "wrapper",
		"timeout 5 cat " + f.home + "/.ssh/id_rsa": "secrets",
	} {
		if d := f.decide(strings.Fields(argv), verdict.ModeTrusted); d.Verdict != verdict.Deny || !hasReason(d, why) {
			t.Errorf("%s: %s, want deny with %q; reasons %q", argv, d.Verdict, why, d.Reasons)
		}
	}
	if d := f.decide([]string{"env", "-S", "sh -c id"}, verdict.ModeTrusted); d.Verdict != verdict.Deny || !hasReason(d, "splits a string") {
		t.Errorf("env -S: %s %q", d.Verdict, d.Reasons)
	}
	// time -o FILE writes FILE: checked like any write.
	if d := f.decide([]string{"time", "-o", ".git/hooks/pre-commit", "true"}, verdict.ModeTrusted); d.Verdict != verdict.Deny || !hasReason(d, ".git/hooks") {
		t.Errorf("time -o .git/hooks/pre-commit: %s %q", d.Verdict, d.Reasons)
	}
}

// The hard denials kept under the enforced sandbox, and that each says why it
// is dangerous even there.
func TestKeptHardDenialsSayWhy(t *testing.T) {
	f := newFixture(t)
	ctx := f.ctx
	ctx.Sandbox, ctx.SandboxBy = true, "Landlock"
	for _, argv := range [][]string{
		{"sudo", "ls"}, {"su", "-c", "id"}, {"doas", "ls"}, {"pkexec", "ls"},
		{"docker", "ps"}, {"podman", "run", "alpine"}, {"ssh", "host", "id"}, {"kubectl", "exec", "pod", "--", "sh"},
		{"bash", "-c", "ls"}, {"sh"}, {"python3", "-c", "print(1)"}, {"node", "-e", "1"}, {"perl", "-e", "1"}, {"python3"},
		{"cat", f.home + "/.ssh/id_rsa"}, {"cat", f.prot + "/key"}, {"cat", "--frobnicate", f.home + "/.ssh/id_rsa"}, {"git", "frobnicate", "--x=" + f.prot + "/key"}, {"touch", ".git/hooks/pre-commit"}, {"sed", "-i", "s/a/b/", ".bashrc"},
	} {
		for _, mode := range []verdict.Mode{verdict.ModeConfirm, verdict.ModeTrusted} {
			d := f.pol.Decide(decision.Request{Argv: argv, Cwd: f.ws, Mode: mode}, ctx)
			if d.Verdict != verdict.Deny || !hasReason(d, "even inside the sandbox") {
				t.Errorf("%s %q: %s, want deny with a reason saying why even inside the sandbox; reasons %q", mode, argv, d.Verdict, d.Reasons)
			}
		}
	}
}
