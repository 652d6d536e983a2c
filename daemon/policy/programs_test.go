package policy

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
	"go.yaml.in/yaml/v3"
)

// oldDefaultPrograms is the default policy's programs: section as it was
// when those settings lived in default.yaml rather than in the tool specs.
const oldDefaultPrograms = `programs:
  git:
    sandbox_exec: [/usr/lib/git-core]   # git runs its own helpers (a read-only sandbox executes nothing else)
    exec_env:
      GIT_CONFIG_NOSYSTEM: "1"
      GIT_CONFIG_GLOBAL: /dev/null
      GIT_TERMINAL_PROMPT: "0"
      GIT_PAGER: cat
      GIT_EDITOR: "true"
      GIT_ALLOW_PROTOCOL: "file:git:http:https:ssh"
      GIT_NO_REPLACE_OBJECTS: "1"
      GIT_NO_LAZY_FETCH: "1"   # a partial clone must not fetch from its remote in a command classified offline
    exec_args: [-c, core.hooksPath=/dev/null, -c, core.fsmonitor=false, -c, safe.bareRepository=explicit, -c, core.pager=cat,
                -c, core.sshCommand=ssh, -c, credential.helper=, -c, protocol.ext.allow=never, -c, core.editor=true,
                -c, sequence.editor=true, -c, gpg.program=gpg, -c, core.askPass=, --no-pager]
  go:
    sandbox_exec: [$PROGDIR/../pkg/tool]             # go vet and go list run the toolchain's own tools
    sandbox_cache: ["~/.cache/go-build", "~/go/pkg/mod"]   # the build and module caches, also for read-only go commands
  rg:
    exec_args: [--no-config]
  curl:
    exec_args: [-q]   # must be first: do not read ~/.curlrc
  wget:
    exec_args: [--no-config]
  # A project's .npmrc may name programs npm runs (git=, shell=, editor=,
  # browser=): the environment wins over it.
  npm:
    exec_env: {npm_config_script_shell: /bin/sh, npm_config_update_notifier: "false", npm_config_fund: "false",
               npm_config_git: git, npm_config_shell: /bin/sh, npm_config_editor: "true", npm_config_browser: "false"}
  pnpm:
    exec_env: {npm_config_script_shell: /bin/sh, npm_config_git: git, npm_config_shell: /bin/sh, npm_config_editor: "true"}
  make:
    exec_env: {MAKEFLAGS: ""}
  # On a terminal less takes commands: secure mode has none that run
  # programs, edit or write files.
  less:
    exec_env: {LESSSECURE: "1"}
  more:
    exec_env: {LESSSECURE: "1"}
`

// A tool's forced arguments, environment and sandbox needs are its spec's:
// the default policy runs every program exactly as the programs: section it
// used to carry made it, a policy without that section still forces them,
// and an operator's policy copied from the old default, or adding a
// credential helper, keeps working.
func TestSpecsOwnWhatProgramsRunWith(t *testing.T) {
	var old struct {
		Programs map[string]toolspec.Program `yaml:"programs"`
	}
	if err := yaml.Unmarshal([]byte(oldDefaultPrograms), &old); err != nil {
		t.Fatal(err)
	}
	same := func(what string, got map[string]toolspec.Program) {
		t.Helper()
		if len(got) != len(old.Programs) {
			t.Errorf("%s: %d programs with forced settings, want %d: %v", what, len(got), len(old.Programs), slices.Sorted(maps.Keys(got)))
		}
		for name, want := range old.Programs {
			g := got[name]
			if !slices.Equal(g.ExecArgs, want.ExecArgs) || !maps.Equal(g.ExecEnv, want.ExecEnv) || !slices.Equal(g.SandboxExec, want.SandboxExec) || !slices.Equal(g.SandboxCache, want.SandboxCache) {
				t.Errorf("%s: %s runs with %+v, want %+v", what, name, g, want)
			}
		}
	}
	same("the default policy", Default().programs)

	src := string(DefaultYAML())
	if !strings.Contains(src, "\nprograms:\n") {
		t.Fatal("the default policy has no programs: key any more; update this test")
	}
	without := strings.Replace(src, "\nprograms:\n", "\n", 1)
	p, err := Parse("without.yaml", []byte(without))
	if err != nil {
		t.Fatal(err)
	}
	same("a policy without programs:", p.programs)

	copied := strings.Replace(src, "\nprograms:\n", "\n"+oldDefaultPrograms, 1)
	p, err = Parse("copied.yaml", []byte(copied))
	if err != nil {
		t.Fatal(err)
	}
	same("a policy with the old programs: section", p.programs)

	// What the docs show an operator adding (docs/CREDENTIALS.md).
	helper := `-c, "credential.https://github.com.helper=/usr/local/libexec/termd/git-credential-env"`
	added := strings.Replace(src, "\nprograms:\n", "\nprograms:\n  git:\n    exec_args: ["+helper+"]\n    sandbox_exec: [/bin, /usr/lib/git-core]\n    exec_env: {GIT_TRACE: \"0\"}\n", 1)
	p, err = Parse("added.yaml", []byte(added))
	if err != nil {
		t.Fatal(err)
	}
	git := p.programs["git"]
	wantArgs := append(slices.Clone(old.Programs["git"].ExecArgs), "-c", "credential.https://github.com.helper=/usr/local/libexec/termd/git-credential-env")
	if !slices.Equal(git.ExecArgs, wantArgs) || !slices.Equal(git.SandboxExec, []string{"/usr/lib/git-core", "/bin"}) || git.ExecEnv["GIT_TRACE"] != "0" || git.ExecEnv["GIT_CONFIG_GLOBAL"] != "/dev/null" {
		t.Fatalf("an operator's additions: git runs with %+v", git)
	}
	// Tools that run git get the addition too.
	if p.childEnv["git"]["GIT_CONFIG_COUNT"] != "12" {
		t.Fatalf("git's -c settings as environment: %v", p.childEnv["git"])
	}
	// The canonical text (and so the policy version) shows what runs.
	if !strings.Contains(string(Default().canon), "core.hooksPath=/dev/null") {
		t.Fatal("the canonical policy text does not show git's forced settings")
	}
}

// What the engine does with them: a command's exec plan.
func TestForcedSettingsReachTheExecPlan(t *testing.T) {
	f := newFixture(t)
	src := strings.Replace(string(defaultYAML), "trusted_path: [/usr/local/bin, /usr/bin, /bin, /usr/local/go/bin]", "trusted_path: ["+f.bin+"]", 1)
	p, err := Parse("test.yaml", []byte(strings.Replace(src, "\nprograms:\n", "\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	d := p.Decide(decision.Request{Argv: []string{"git", "status"}, Cwd: f.ws, Mode: verdict.ModeTrusted}, f.ctx)
	if d.Verdict != verdict.Allow || len(d.ExecArgv) < 3 || d.ExecArgv[1] != "-c" || d.ExecArgv[2] != "core.hooksPath=/dev/null" || d.ExecArgv[len(d.ExecArgv)-1] != "status" || d.ExecEnv["GIT_CONFIG_GLOBAL"] != "/dev/null" {
		t.Fatalf("git status without a programs: section: %s %v %v", d.Verdict, d.ExecArgv, d.ExecEnv)
	}
	if !slices.Contains(d.Sandbox.Exec, "/usr/lib/git-core") {
		t.Fatalf("git status may not execute git-core: %+v", d.Sandbox)
	}
	for argv, env := range map[string]string{"rg x": "", "curl https://e.com": "", "less data.txt": "LESSSECURE", "make": "MAKEFLAGS"} {
		d := p.Decide(decision.Request{Argv: strings.Fields(argv), Cwd: f.ws, Mode: verdict.ModeTrusted}, f.ctx)
		if env != "" {
			if _, ok := d.ExecEnv[env]; !ok {
				t.Errorf("%s: runs without %s: %v", argv, env, d.ExecEnv)
			}
			continue
		}
		if want := map[string]string{"rg": "--no-config", "curl": "-q"}[strings.Fields(argv)[0]]; len(d.ExecArgv) < 2 || d.ExecArgv[1] != want {
			t.Errorf("%s: runs as %v, want %s first", argv, d.ExecArgv, want)
		}
	}
}
