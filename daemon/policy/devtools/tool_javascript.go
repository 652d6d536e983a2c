package devtools

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
)

// jsExecEnv: a project's .npmrc may name programs npm and pnpm run (git=,
// shell=, editor=, browser=): the environment wins over it.
var jsExecEnv = map[string]map[string]string{
	"npm": {"npm_config_script_shell": "/bin/sh", "npm_config_update_notifier": "false", "npm_config_fund": "false",
		"npm_config_git": "git", "npm_config_shell": "/bin/sh", "npm_config_editor": "true", "npm_config_browser": "false"},
	"pnpm": {"npm_config_script_shell": "/bin/sh", "npm_config_git": "git", "npm_config_shell": "/bin/sh", "npm_config_editor": "true"},
}

var _ = toolspec.Family(registerJS)

// registerJS: npm, pnpm and yarn. Options may appear anywhere; lifecycle
// scripts are project code.
func registerJS() {
	R, W := grammar.KPathRead, grammar.KPathWrite
	jsGlobal := grammar.Opts(grammar.Flags("-D|--save-dev -P|--save-prod -O|--save-optional -E|--save-exact -B|--save-bundle --no-save -S|--save --save-peer --ignore-scripts --no-audit --audit --no-fund --production --legacy-peer-deps --strict-peer-deps -f|--force --dry-run --prefer-offline --offline --prefer-online --package-lock-only --no-package-lock --workspaces --if-present -s|--silent -q|--quiet --json -p|--parseable -l|--long -a|--all --no-color --progress --no-progress --foreground-scripts --install-links --verbose -d --frozen-lockfile --no-frozen-lockfile --immutable --recursive -r --include-workspace-root --fix -h|--help -v|--version --prod --dev --no-optional --lockfile-only --check-files --non-interactive --pure-lockfile"),
		grammar.List(grammar.O("--omit="), grammar.O("--include="), grammar.O("-w|--workspace|--filter="), grammar.O("--loglevel="), grammar.O("--depth="), grammar.O("--registry="), grammar.O("--audit-level="), grammar.O("--cache=", W), grammar.O("--color="), grammar.O("--install-strategy="), grammar.O("--save-prefix="), grammar.O("--tag="), grammar.O("--before="), grammar.O("--reporter="), grammar.O("-C|--dir=", R).MovesDir(), grammar.O("--cwd=", R).MovesDir(),
			grammar.O("-g|--global").DenyWith("installs outside the workspace"), grammar.O("--location=").DenyWith("installs outside the workspace"), grammar.O("--prefix=", R).MovesDir(), grammar.O("--script-shell=").DenyWith("chooses the shell that runs scripts"), grammar.O("--node-options=").DenyWith("injects node options"), grammar.O("--userconfig=").DenyWith("loads a config file that can run programs"), grammar.O("--globalconfig=").DenyWith("loads a config file that can run programs"), grammar.O("--init-module=").DenyWith("runs a module"), grammar.O("-y|--yes").DenyWith("auto-confirms running downloaded code"), grammar.O("--unsafe-perm").DenyWith("runs scripts as root")))
	js := func(tool string) {
		install := &grammar.CmdSpec{Inherit: true, Net: true, Write: true, Code: true, Post: postJSInstall}
		test := &grammar.CmdSpec{Inherit: true, Code: true}
		run := &grammar.CmdSpec{Inherit: true, Code: true}
		read := &grammar.CmdSpec{Inherit: true}
		readNet := &grammar.CmdSpec{Inherit: true, Net: true}
		// "audit fix" installs the fixed versions: their install scripts run.
		audit := &grammar.CmdSpec{Inherit: true, Net: true, Post: func(p *grammar.Parsed) {
			if len(p.Operands) > 0 && p.Operands[0].Value == "fix" {
				p.Write, p.Code = true, true
			}
		}}
		write := &grammar.CmdSpec{Inherit: true, Write: true}
		m := map[string]*grammar.CmdSpec{
			"install": withName("install", install), "ci": withName("ci", install), "add": withName("add", install), "update": withName("update", install), "remove": withName("remove", install),
			"test": withName("test", test), "run": withName("run", run), "start": withName("start", run), "rebuild": withName("rebuild", run),
			"ls": withName("ls", read), "why": withName("why", read), "root": withName("root", read), "prefix": withName("prefix", read), "explain": withName("explain", read),
			"view": withName("view", readNet), "outdated": withName("outdated", readNet), "audit": withName("audit", audit), "info": withName("info", readNet),
			"pack": withName("pack", write), "prune": withName("prune", write), "dedupe": withName("dedupe", write),
			"config": withName("config", &grammar.CmdSpec{Inherit: true, Post: postJSConfig}),
			// exec and dlx run a package's program, downloaded when it is
			// not installed: project code from the network, which asks.
			"exec": withName("exec", &grammar.CmdSpec{Inherit: true, Net: true, Write: true, Code: true, Post: func(p *grammar.Parsed) {
				p.Ask(verdict.RiskHigh, "%s exec runs a package's program, downloading it when it is not installed (project code from the network)", p.Tool)
			}}),
			"dlx": withName("dlx", &grammar.CmdSpec{Inherit: true, Net: true, Write: true, Code: true, Post: func(p *grammar.Parsed) {
				p.Ask(verdict.RiskHigh, "%s dlx downloads a package and runs its program (project code from the network)", p.Tool)
			}}),
		}
		if tool == "npm" {
			// npm install and npm ci fetch from the registry (fetch.go);
			// pnpm and yarn also run their project's own hooks.
			m["install"].Fetch, m["ci"].Fetch = true, true
		}
		al := map[string]string{"i": "install", "isntall": "install", "in": "install", "t": "test", "tst": "test", "run-script": "run", "rum": "run", "urn": "run", "list": "ls", "ll": "ls", "la": "ls", "v": "view", "show": "view", "c": "config", "x": "exec", "rm": "remove", "r": "remove", "un": "remove", "uninstall": "remove", "unlink": "remove", "up": "update", "upgrade": "update", "clean-install": "ci", "install-clean": "ci", "ic": "ci", "rb": "rebuild", "ddp": "dedupe"}
		if tool != "npm" {
			// yarn obeys a checkout's yarn-path / yarnPath and plugins, pnpm its
			// .pnpmfile.cjs, on every command: all of them run project code.
			for _, c := range m {
				post := c.Post
				c.Post = func(p *grammar.Parsed) {
					if post != nil {
						post(p)
					}
					p.Code = true
				}
			}
		}
		toolspec.Register(tool, &toolspec.ToolSpec{Grammar: &grammar.CmdSpec{NeedSub: true, Subs: m, Aliases: al, Opts: jsGlobal}, Entry: jsEntry(tool), Check: checkNpmrc, Runs: []string{"git"}, ExecEnv: jsExecEnv[tool]})
	}
	js("npm")
	js("pnpm")
	js("yarn")
}

func withName(n string, c *grammar.CmdSpec) *grammar.CmdSpec { cc := *c; cc.Name = n; return &cc }

func postJSInstall(p *grammar.Parsed) {
	if p.Has("--ignore-scripts") {
		p.Code = false
	}
	for i := range p.Operands {
		p.Operands[i].Kind = grammar.KOther // package specs
	}
	if len(p.Operands) > 0 {
		// npm install PKG adds a dependency (package.json and the lock
		// file change): not a plain fetch of what the project names.
		p.Fetch = false
	}
}

func postJSConfig(p *grammar.Parsed) {
	if len(p.Operands) == 0 {
		return
	}
	switch p.Operands[0].Value {
	case "get", "list", "ls":
		return
	}
	p.Deny(verdict.RiskHigh, "%s config: writing configuration (npmrc can choose the script shell and run programs)", p.Tool)
}

// jsEntry: a JavaScript package manager's entry files. -w/--workspace/
// --filter members and -C/--dir/--cwd directories have their own
// package.json and .npmrc; a package.json's workspaces are read too.
func jsEntry(tool string) *toolspec.EntryFiles {
	names := map[string][]string{
		"npm":  {"package.json", ".npmrc"},
		"pnpm": {"package.json", ".npmrc", ".pnpmfile.cjs"},
		"yarn": {"package.json", ".npmrc", ".yarnrc", ".yarnrc.yml"},
	}[tool]
	return &toolspec.EntryFiles{Names: names, WalksUp: true, Dirs: jsDirs, Extra: jsWorkspaceMembers}
}

func jsDirs(pc *grammar.Parsed, dir string) []string {
	var out []string
	for _, d := range pc.Values("-w", "-C", "--cwd", "--prefix") {
		if d != "" && !strings.ContainsAny(d, "*{}@") {
			out = append(out, toolspec.ResolvePath(dir, d))
		}
	}
	return out
}

func jsWorkspaceMembers(_ *grammar.Parsed, _, _ string, found []string) []string {
	var out []string
	for _, p := range found {
		if filepath.Base(p) == "package.json" {
			out = append(out, npmWorkspaceMembers(p)...)
		}
	}
	return out
}

// npmWorkspaceMembers lists the package.json files of the members a
// package.json names in its "workspaces" field (globs expanded, bounded).
func npmWorkspaceMembers(pkg string) []string {
	data, err := toolspec.ReadProjectFile(pkg, 1<<20)
	if err != nil {
		return nil
	}
	var doc struct {
		Workspaces json.RawMessage `json:"workspaces"`
	}
	if json.Unmarshal(data, &doc) != nil || len(doc.Workspaces) == 0 {
		return nil
	}
	var pats []string
	if json.Unmarshal(doc.Workspaces, &pats) != nil {
		var obj struct {
			Packages []string `json:"packages"`
		}
		if json.Unmarshal(doc.Workspaces, &obj) != nil {
			return nil
		}
		pats = obj.Packages
	}
	var out []string
	root := filepath.Dir(pkg)
	for _, pat := range pats {
		matches, _ := filepath.Glob(filepath.Join(root, pat))
		for _, m := range matches {
			if len(out) < 256 {
				out = append(out, filepath.Join(m, "package.json"))
			}
		}
	}
	return out
}

// npmrcRisky are .npmrc keys that move where npm writes (outside the
// workspace: location=global installs into /usr) or what it reads or runs.
var npmrcRisky = grammar.Set("location global prefix userconfig globalconfig cache logs-dir tmp node-options script-shell shell git editor browser viewer init-module onload-script")

// npmrcKeyRE is a plain .npmrc key: a name, or a registry-scoped one
// ("//registry.example.com/:_authToken", "@scope:registry").
var npmrcKeyRE = regexp.MustCompile(`^(//[^\s=${}]+:)?[@a-z0-9._:/-]+$`)

// npmrcProblems reads the .npmrc files npm may use (in the tool's project
// directories and their parents up to the workspace root) and names the
// keys termd does not accept there.
func npmrcProblems(entries []string) []string {
	var out []string
	for _, f := range entries {
		if filepath.Base(f) != ".npmrc" {
			continue
		}
		data, err := toolspec.ReadProjectFile(f, 1<<16)
		if err != nil {
			if _, serr := os.Stat(f); serr == nil {
				// There, but not a small regular file: npm would read it.
				out = append(out, f+" is not a regular file of at most 64 KiB; termd cannot check it")
			}
		}
		if err == nil {
			for n, line := range strings.Split(string(data), "\n") {
				line = strings.TrimSpace(line)
				if line == "" || line[0] == '#' || line[0] == ';' {
					continue
				}
				k, _, _ := strings.Cut(line, "=")
				k = strings.ToLower(strings.Trim(strings.TrimSpace(k), `"'`))
				switch {
				case npmrcRisky[k]:
					out = append(out, f+" sets "+k+", which moves where npm writes or what it reads or runs; remove that line")
				case !npmrcKeyRE.MatchString(k):
					// npm expands ${VAR} and unquotes keys: a key termd cannot
					// read plainly could be any of the above.
					// (The key is not quoted: the file may be a link to a secret.)
					out = append(out, fmt.Sprintf("%s line %d has a key termd cannot check; write it plainly or remove it", f, n+1))
				}
			}
		}
	}
	return out
}

func checkNpmrc(c *toolspec.ToolCall) {
	if c.Cwd == "" {
		return
	}
	for _, why := range npmrcProblems(c.Entries) {
		c.Deny(verdict.RiskHigh, why)
	}
}
