package policy

import (
	"net/url"
	"path/filepath"
	"strings"
)

// postMake: a command-line assignment is make code too when it expands
// ($(shell), $(file)) or picks the shell or the makefiles, like the refused
// --eval; plain NAME=value assignments (CC=clang) pass.
func postMake(p *parsed) {
	for _, op := range p.operands {
		left, val, ok := strings.Cut(op.value, "=")
		if !ok {
			continue
		}
		left = strings.TrimSpace(left)
		name := strings.TrimRight(left, ":!+?")
		immediate := strings.HasSuffix(left, ":") || strings.HasSuffix(left, "!") // := ::= !=
		if immediate || strings.ContainsAny(val, "$`") || makeControlVars[name] {
			p.deny(RiskCritical, "make %s: this assignment is make code (it expands, is immediate, or sets %s), like the refused --eval", clip(op.value), name)
		}
	}
}

// makeControlVars choose the shell or the makefiles make reads.
var makeControlVars = set("SHELL .SHELLFLAGS MAKEFILES MAKEFLAGS MFLAGS MAKE GNUMAKEFLAGS")

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

func registerMake() {
	R := KPathRead
	mk := &cmdSpec{code: true, write: true, operand: KOther, post: postMake, opts: opts(flags("-k|--keep-going -s|--silent|--quiet --no-silent -n|--dry-run|--just-print|--recon -B|--always-make -i|--ignore-errors -e|--environment-overrides -q|--question -r|--no-builtin-rules -R|--no-builtin-variables -w|--print-directory --no-print-directory -t|--touch -d -p|--print-data-base --trace --warn-undefined-variables -L|--check-symlink-times -S|--no-keep-going|--stop -v|--version -h|--help"),
		list(o("-C|--directory=", R), o("-f|--file|--makefile=", R), o("-j|--jobs?"), o("-l|--load-average|--max-load?"), o("-O|--output-sync?"), o("-W|--what-if|--new-file|--assume-new=", R), o("-o|--old-file|--assume-old=", R), o("--debug?"), o("-I|--include-dir=", R), o("--shuffle?"), o("--jobserver-style="),
			o("-E|--eval=").denyWith("evaluates make code given on the command line")))}
	register("make", &toolSpec{grammar: mk, entry: &entryFiles{names: []string{"GNUmakefile", "makefile", "Makefile"}, chdir: "-C", extra: makeFiles}})
	reg("gmake", mk)

}

func registerJS() {
	R, W := KPathRead, KPathWrite
	jsGlobal := opts(flags("-D|--save-dev -P|--save-prod -O|--save-optional -E|--save-exact -B|--save-bundle --no-save -S|--save --save-peer --ignore-scripts --no-audit --audit --no-fund --production --legacy-peer-deps --strict-peer-deps -f|--force --dry-run --prefer-offline --offline --prefer-online --package-lock-only --no-package-lock --workspaces --if-present -s|--silent -q|--quiet --json -p|--parseable -l|--long -a|--all --no-color --progress --no-progress --foreground-scripts --install-links --verbose -d --frozen-lockfile --no-frozen-lockfile --immutable --recursive -r --include-workspace-root --fix -h|--help -v|--version --prod --dev --no-optional --lockfile-only --check-files --non-interactive --pure-lockfile"),
		list(o("--omit="), o("--include="), o("-w|--workspace|--filter="), o("--loglevel="), o("--depth="), o("--registry="), o("--audit-level="), o("--cache=", W), o("--color="), o("--install-strategy="), o("--save-prefix="), o("--tag="), o("--before="), o("--reporter="), o("-C|--dir=", R), o("--cwd=", R),
			o("-g|--global").denyWith("installs outside the workspace"), o("--location=").denyWith("installs outside the workspace"), o("--prefix=").denyWith("installs outside the workspace"), o("--script-shell=").denyWith("chooses the shell that runs scripts"), o("--node-options=").denyWith("injects node options"), o("--userconfig=").denyWith("loads a config file that can run programs"), o("--globalconfig=").denyWith("loads a config file that can run programs"), o("--init-module=").denyWith("runs a module"), o("-y|--yes").denyWith("auto-confirms running downloaded code"), o("--unsafe-perm").denyWith("runs scripts as root")))
	js := func(tool string) {
		install := &cmdSpec{inherit: true, net: true, write: true, code: true, post: postJSInstall}
		test := &cmdSpec{inherit: true, code: true}
		run := &cmdSpec{inherit: true, code: true}
		read := &cmdSpec{inherit: true}
		readNet := &cmdSpec{inherit: true, net: true}
		// "audit fix" installs the fixed versions: their install scripts run.
		audit := &cmdSpec{inherit: true, net: true, post: func(p *parsed) {
			if len(p.operands) > 0 && p.operands[0].value == "fix" {
				p.write, p.code = true, true
			}
		}}
		write := &cmdSpec{inherit: true, write: true}
		m := map[string]*cmdSpec{
			"install": withName("install", install), "ci": withName("ci", install), "add": withName("add", install), "update": withName("update", install), "remove": withName("remove", install),
			"test": withName("test", test), "run": withName("run", run), "start": withName("start", run), "rebuild": withName("rebuild", run),
			"ls": withName("ls", read), "why": withName("why", read), "root": withName("root", read), "prefix": withName("prefix", read), "explain": withName("explain", read),
			"view": withName("view", readNet), "outdated": withName("outdated", readNet), "audit": withName("audit", audit), "info": withName("info", readNet),
			"pack": withName("pack", write), "prune": withName("prune", write), "dedupe": withName("dedupe", write),
			"config": withName("config", &cmdSpec{inherit: true, post: postJSConfig}),
			"exec":   withName("exec", &cmdSpec{inherit: true, post: func(p *parsed) { p.deny(RiskCritical, "%s exec runs a downloaded or arbitrary program", p.tool) }}),
			"dlx":    withName("dlx", &cmdSpec{inherit: true, post: func(p *parsed) { p.deny(RiskCritical, "%s dlx runs a downloaded program", p.tool) }}),
		}
		al := map[string]string{"i": "install", "isntall": "install", "in": "install", "t": "test", "tst": "test", "run-script": "run", "rum": "run", "urn": "run", "list": "ls", "ll": "ls", "la": "ls", "v": "view", "show": "view", "c": "config", "x": "exec", "rm": "remove", "r": "remove", "un": "remove", "uninstall": "remove", "unlink": "remove", "up": "update", "upgrade": "update", "clean-install": "ci", "install-clean": "ci", "ic": "ci", "rb": "rebuild", "ddp": "dedupe"}
		if tool != "npm" {
			// yarn obeys a checkout's yarn-path / yarnPath and plugins, pnpm its
			// .pnpmfile.cjs, on every command: all of them run project code.
			for _, c := range m {
				post := c.post
				c.post = func(p *parsed) {
					if post != nil {
						post(p)
					}
					p.code = true
				}
			}
		}
		register(tool, &toolSpec{grammar: &cmdSpec{needSub: true, subs: m, aliases: al, opts: jsGlobal}, entry: jsEntry(tool)})
	}
	js("npm")
	js("pnpm")
	js("yarn")
}

func registerRust() {
	R, W := KPathRead, KPathWrite
	cargoGlobal := opts(flags("-v|--verbose -q|--quiet --frozen --locked --offline -h|--help -V|--version --list"), list(o("--color="), o("--manifest-path=", R), o("--config=").denyWith(whyConfig), o("-Z=").denyWith("enables unstable features"), o("-C=").denyWith("is an unstable option")))
	cargoSub := opts(flags("--workspace --all --lib --bins --examples --tests --benches --all-targets --all-features --no-default-features -r|--release --keep-going --no-run --no-fail-fast --doc --future-incompat-report --ignore-rust-version --unit-graph --no-deps --all-packages --fix --allow-dirty --allow-staged --allow-no-vcs --dry-run --document-private-items --check"),
		list(o("-p|--package="), o("--exclude="), o("--bin="), o("--example="), o("--test="), o("--bench="), o("-F|--features="), o("--profile="), o("-j|--jobs="), o("--target="), o("--target-dir=", W), o("--message-format="), o("--timings?"), o("--format-version="), o("--depth="), o("-e|--edges="), o("-i|--invert="), o("--prefix="), o("--charset="), o("--filter-platform="), o("--open").denyWith("opens a browser")))
	cs := func(name string, c *cmdSpec) *cmdSpec { c.name = name; c.inherit = true; c.opts = cargoSub; return c }
	register("cargo", &toolSpec{entry: &entryFiles{names: []string{"Cargo.toml", "build.rs"}, walksUp: true, extra: cargoManifests}, grammar: &cmdSpec{needSub: true, opts: cargoGlobal, aliases: map[string]string{"b": "build", "t": "test", "r": "run", "c": "check", "d": "doc"},
		subs: subs(cs("build", &cmdSpec{code: true, net: true, write: true}), cs("test", &cmdSpec{code: true, net: true, write: true}), cs("run", &cmdSpec{code: true, net: true, write: true}),
			cs("check", &cmdSpec{code: true, net: true, write: true}), cs("clippy", &cmdSpec{code: true, net: true, write: true}), cs("doc", &cmdSpec{code: true, net: true, write: true}), cs("bench", &cmdSpec{code: true, net: true, write: true}),
			// A repository's .cargo/config.toml and rust-toolchain.toml choose the
			// programs cargo runs (rustc, wrappers, runners): every cargo command
			// in a checkout runs project-chosen code.
			cs("fmt", &cmdSpec{code: true, write: true}), cs("fetch", &cmdSpec{code: true, net: true}), cs("tree", &cmdSpec{code: true, net: true}), cs("metadata", &cmdSpec{code: true, net: true}), cs("clean", &cmdSpec{code: true, write: true}), cs("update", &cmdSpec{code: true, net: true, write: true}), cs("version", &cmdSpec{}))}})
}

func registerPython() {
	R, W := KPathRead, KPathWrite
	pt := &cmdSpec{code: true, write: true, operand: KOther, post: postPytest, opts: opts(flags("-x|--exitfirst -q|--quiet -v|--verbose -s -l|--showlocals --lf|--last-failed --ff|--failed-first --nf|--new-first --sw|--stepwise --co|--collect-only --disable-warnings --noconftest --strict-markers --no-header --no-summary --cache-clear --setup-show --fixtures -h|--help --version --runxfail"),
		list(o("-k="), o("-m="), o("--maxfail="), o("--capture="), o("--tb="), o("-r="), o("--durations="), o("-W|--pythonwarnings="), o("--junitxml|--junit-xml=", W), o("--rootdir=", R), o("-c=", R), o("--confcutdir=", R), o("--ignore=", R), o("--deselect="), o("--import-mode="), o("--basetemp=", W), o("-n|--numprocesses="), o("--color="), o("--timeout="),
			o("--pdb").denyWith("starts an interactive debugger"), o("--pdbcls=").denyWith("loads a debugger class"), o("-p=").denyWith("loads a plugin module chosen by the caller"), o("-o|--override-ini=").denyWith("overrides configuration (addopts, plugins)")))}
	register("pytest", &toolSpec{grammar: pt, entry: &entryFiles{names: []string{"conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"}, walksUp: true}})
	reg("py.test", pt)
}

func withName(n string, c *cmdSpec) *cmdSpec { cc := *c; cc.name = n; return &cc }

func postJSInstall(p *parsed) {
	if p.has("--ignore-scripts") {
		p.code = false
	}
	for i := range p.operands {
		p.operands[i].kind = KOther // package specs
	}
}

func postJSConfig(p *parsed) {
	if len(p.operands) == 0 {
		return
	}
	switch p.operands[0].value {
	case "get", "list", "ls":
		return
	}
	p.deny(RiskHigh, "%s config: writing configuration (npmrc can choose the script shell and run programs)", p.tool)
}

func registerNet() {
	R, W := KPathRead, KPathWrite
	reg("curl", &cmdSpec{net: true, operand: KURL, post: postCurl, opts: opts(flags("-s|--silent -S|--show-error -L|--location -O|--remote-name -J|--remote-header-name -I|--head -i|--include -f|--fail --fail-with-body -v|--verbose -k|--insecure --compressed -G|--get -N|--no-buffer -#|--progress-bar --http1.0 --http1.1 --http2 --http3 --tlsv1.2 --tlsv1.3 -Z|--parallel -4|--ipv4 -6|--ipv6 --create-dirs --remote-name-all --location-trusted --fail-early -g|--globoff --no-progress-meter --no-keepalive --raw --ssl-reqd --path-as-is -q|--disable -h|--help -V|--version"),
		list(o("-o|--output=", W), o("--output-dir=", W), o("-H|--header="), o("-X|--request="), o("-d|--data|--data-ascii="), o("--data-raw="), o("--data-binary="), o("--data-urlencode="), o("--json="), o("-F|--form="), o("--form-string="), o("-u|--user="), o("-A|--user-agent="), o("-e|--referer="), o("-m|--max-time="), o("--connect-timeout="), o("--retry="), o("--retry-delay="), o("--retry-max-time="), o("-w|--write-out="), o("-r|--range="), o("-C|--continue-at="), o("-T|--upload-file=", R), o("-b|--cookie="), o("-c|--cookie-jar=", W), o("-x|--proxy="), o("--noproxy="), o("--url=", KURL), o("--cacert=", R), o("--capath=", R), o("--cert|-E=", R), o("--key=", R), o("--libcurl=", W), o("--trace=", W), o("--trace-ascii=", W), o("--stderr=", W), o("-D|--dump-header=", W), o("--etag-save=", W), o("--etag-compare=", R), o("--hsts=", W), o("--alt-svc=", W), o("--max-filesize="), o("--limit-rate="), o("--resolve="), o("--connect-to="), o("--max-redirs="), o("-z|--time-cond="), o("--proto=").denyWith("changes the allowed protocols"), o("--proto-redir=").denyWith("changes the allowed redirect protocols"), o("--oauth2-bearer="), o("--aws-sigv4="), o("-Y|--speed-limit="), o("-y|--speed-time="), o("--variable="), o("--netrc-file=", R),
			o("-K|--config=").denyWith("reads options from a file"), o("-n|--netrc").denyWith("reads credentials from ~/.netrc"), o("--netrc-optional").denyWith("reads credentials from ~/.netrc"), o("--engine=").denyWith("loads a crypto engine module")))})
	reg("wget", &cmdSpec{net: true, write: true, operand: KURL, post: postWget, opts: opts(flags("-q|--quiet -c|--continue -N|--timestamping -r|--recursive -k|--convert-links -p|--page-requisites -m|--mirror -S|--server-response --spider --no-check-certificate -x|--force-directories --show-progress -v|--verbose -d|--debug -4|--inet4-only -6|--inet6-only --no-verbose --no-clobber --no-directories --no-parent -nH|--no-host-directories --content-disposition --no-cookies -h|--help -V|--version --https-only"),
		list(o("-O|--output-document=", W), o("-P|--directory-prefix=", W), o("-l|--level="), o("-t|--tries="), o("-T|--timeout="), o("--header="), o("-U|--user-agent="), o("--user="), o("--password="), o("--post-data="), o("--post-file=", R), o("--body-file=", R), o("--body-data="), o("--method="), o("-i|--input-file=", R), o("-o|--output-file=", W), o("-a|--append-output=", W), o("--limit-rate="), o("-w|--wait="), o("--restrict-file-names="), o("--cut-dirs="), o("-A|--accept="), o("-R|--reject="), o("--progress="), o("--max-redirect="), o("--load-cookies=", R), o("--save-cookies=", W), o("--ca-certificate=", R), o("--certificate=", R), o("--private-key=", R),
			o("-e|--execute=").denyWith("runs wgetrc commands"), o("--config=").denyWith("reads commands from a file"), o("--use-askpass?").denyWith("runs a password program")))})
}

var allowedURLSchemes = map[string]bool{"http": true, "https": true}

func checkURL(p *parsed, v string) {
	if i := strings.Index(v, "://"); i >= 0 {
		scheme := strings.ToLower(v[:i])
		if !allowedURLSchemes[scheme] {
			p.deny(RiskHigh, "%s: URL scheme %q is not allowed (only http and https)", p.tool, clip(scheme))
		}
	} else if strings.Contains(strings.ToLower(v), "file:") {
		p.deny(RiskHigh, "%s: file: URLs are not allowed", p.tool)
	}
}

func curlURLs(p *parsed) []string {
	var urls []string
	for _, op := range p.operands {
		urls = append(urls, op.value)
	}
	return append(urls, p.values("--url")...)
}

func postCurl(p *parsed) {
	for _, v := range curlURLs(p) {
		checkURL(p, v)
		// curl expands [a-z] and {a,b} before it looks at the scheme:
		// "fil[e-e]:/etc/shadow" is a file: URL. A URL that can glob must
		// name its scheme literally.
		l := strings.ToLower(v)
		if !p.has("-g") && strings.ContainsAny(v, "[]{}") && !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") {
			p.deny(RiskHigh, "curl %s: a URL with [..] or {..} globs is expanded before its scheme is known; start it with http:// or https://, or pass -g", clip(v))
		}
	}
	for _, u := range p.opts {
		n := u.opt.names[0]
		switch {
		case n == "-d" || n == "--data-binary" || n == "--data-urlencode" || n == "--json":
			v := u.value
			if n == "--data-urlencode" {
				if i := strings.IndexAny(v, "@="); i >= 0 && v[i] == '@' {
					v = v[i:]
				}
			}
			if strings.HasPrefix(v, "@") && v != "@-" {
				p.paths = append(p.paths, operand{value: v[1:], kind: KPathRead})
			}
		case n == "-F":
			curlFormFiles(p, u.value)
		case n == "-T" && !p.has("-g") && strings.ContainsAny(u.value, "[]{}"):
			// curl expands globs in -T names too: {f,/etc/shadow}.
			p.deny(RiskHigh, "curl -T %s: a [..] or {..} glob names files that are not checked; name one file, or pass -g", clip(u.value))
		case n == "-w" && strings.Contains(u.value, "%output{"):
			// curl 8.3+: -w '%output{FILE}' writes the rest of the format there.
			p.deny(RiskHigh, "curl -w %%output{...} writes to a file that is not checked")
		case n == "-H" || n == "-w":
			// -H @FILE reads headers from a file (and sends them);
			// -w @FILE reads the output format from a file (and prints it).
			if strings.HasPrefix(u.value, "@") && u.value != "@-" {
				p.paths = append(p.paths, operand{value: u.value[1:], kind: KPathRead})
			}
		case n == "-b":
			// a cookie argument without '=' is a cookie file to read
			if !strings.Contains(u.value, "=") && u.value != "-" {
				p.paths = append(p.paths, operand{value: u.value, kind: KPathRead})
			}
		case n == "--variable":
			if i := strings.IndexAny(u.value, "=@"); i >= 0 && u.value[i] == '@' && u.value[i+1:] != "-" {
				p.paths = append(p.paths, operand{value: u.value[i+1:], kind: KPathRead})
			}
		}
	}
	urls := curlURLs(p)
	writes := p.has("-O", "--remote-name-all") || len(p.values("-o")) > 0
	if writes && !p.has("-g") {
		for _, u := range urls {
			if strings.ContainsAny(u, "{[") {
				p.deny(RiskHigh, "%s: URL globbing ({...} or [...]) chooses output file names that are not checked; add --globoff", p.tool)
				break
			}
		}
	}
	if p.has("-J") {
		p.deny(RiskHigh, "%s -J: the server chooses the output file name (not checked)", p.tool)
	}
	if p.has("-O", "--remote-name-all") {
		p.write = true
		dir := ""
		if v := p.values("--output-dir"); len(v) > 0 {
			dir = strings.TrimRight(v[len(v)-1], "/") + "/"
		}
		for _, u := range urls {
			if name := urlFileName(u, ""); name != "" {
				p.paths = append(p.paths, operand{value: dir + name, kind: KPathWrite})
			}
		}
	}
	if dirs := p.values("--output-dir"); len(dirs) > 0 {
		// -o NAME is relative to --output-dir
		d := strings.TrimRight(dirs[len(dirs)-1], "/") + "/"
		for _, o := range p.values("-o") {
			if o != "-" && !strings.HasPrefix(o, "/") {
				p.paths = append(p.paths, operand{value: d + o, kind: KPathWrite})
			}
		}
	}
	for _, op := range p.paths {
		if op.kind == KPathWrite {
			p.write = true
		}
	}
}

// curlFormFiles records the files a -F value reads: name=@file,
// name=<file and ;headers=@file / ;headers=<file. Quoted file names are
// refused (their unquoting is curl's, not ours).
func curlFormFiles(p *parsed, v string) {
	_, val, ok := strings.Cut(v, "=")
	if !ok {
		return
	}
	parts := strings.Split(val, ";")
	add := func(f string) {
		if strings.ContainsAny(f, "\"\\") {
			p.deny(RiskHigh, "%s -F: quoted or escaped file names are not checked", p.tool)
			return
		}
		for _, one := range strings.Split(f, ",") {
			if one != "" && one != "-" {
				p.paths = append(p.paths, operand{value: one, kind: KPathRead})
			}
		}
	}
	if strings.HasPrefix(parts[0], "@") || strings.HasPrefix(parts[0], "<") {
		if strings.Contains(val, "\"") {
			p.deny(RiskHigh, "%s -F: quoted or escaped file names are not checked", p.tool)
			return
		}
		add(parts[0][1:])
	}
	for _, prm := range parts[1:] {
		if strings.Contains(prm, ",") {
			// "@f;type=text/plain,/other" is a second file to curl.
			p.deny(RiskHigh, "%s -F: a ',' after ';' names more files, which are not checked", p.tool)
			return
		}
		k, pv, _ := strings.Cut(strings.TrimSpace(prm), "=")
		if strings.EqualFold(k, "headers") && (strings.HasPrefix(pv, "@") || strings.HasPrefix(pv, "<")) {
			add(pv[1:])
		}
	}
}

// urlFileName is the file name a download tool derives from a URL: the last
// path segment (curl strips the query, wget keeps it), or dflt.
func urlFileName(u string, dflt string) string {
	rest := u
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	if i := strings.IndexAny(rest, "#"); i >= 0 {
		rest = rest[:i]
	}
	if dflt == "" {
		if i := strings.IndexByte(rest, '?'); i >= 0 {
			rest = rest[:i]
		}
	}
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return dflt
	}
	path := rest[i:]
	if q := strings.IndexByte(path, '?'); q >= 0 {
		// wget: "dir/file?x=1" is saved as "file?x=1"
		path = path[:strings.LastIndexByte(path[:q], '/')+1] + strings.ReplaceAll(path[q:], "/", "%2F")
	}
	name := path[strings.LastIndexByte(path, '/')+1:]
	if name == "" {
		return dflt
	}
	return name
}

func postWget(p *parsed) {
	for _, op := range p.operands {
		checkURL(p, op.value)
	}
	if p.has("--spider") || contains(p.values("-O"), "-") {
		p.write = false
	}
	for _, o := range []string{"-r", "-m", "-p"} {
		if p.has(o) {
			p.deny(RiskHigh, "wget %s: recursive retrieval writes files and directories named by the server (not checked)", o)
		}
	}
	if p.has("--content-disposition") {
		p.deny(RiskHigh, "wget --content-disposition: the server chooses the output file name (not checked)")
	}
	if p.has("-i") {
		p.deny(RiskHigh, "wget -i: the URLs (and so the output file names) in the list are not checked")
	}
	for _, v := range p.values("--restrict-file-names") {
		if l := strings.ToLower(v); strings.Contains(l, "lowercase") || strings.Contains(l, "uppercase") {
			p.deny(RiskHigh, "wget --restrict-file-names=%s: changes the case of saved names (\".GIT/CONFIG\" becomes .git/config), which is not checked", clip(v))
		}
	}
	if p.has("--cut-dirs") {
		p.deny(RiskHigh, "wget --cut-dirs: the directories the saved file lands in are not checked")
	}
	if len(p.values("-O")) > 0 || p.has("--spider") {
		return
	}
	// Default output: the URL's last path segment (index.html for a
	// directory), under -P DIR, or HOST/PATH with -x.
	dir := ""
	if v := p.values("-P"); len(v) > 0 {
		dir = strings.TrimRight(v[len(v)-1], "/") + "/"
	}
	for _, op := range p.operands {
		name := urlFileName(op.value, "index.html")
		if p.has("-x") {
			rest := op.value
			if i := strings.Index(rest, "://"); i >= 0 {
				rest = rest[i+3:]
			}
			if i := strings.LastIndexByte(rest, '/'); i >= 0 {
				name = rest[:i+1] + name
			} else {
				name = rest + "/" + name
			}
			if p.has("--no-host-directories") {
				// -nH: PATH without the HOST/ directory.
				if i := strings.IndexByte(name, '/'); i >= 0 {
					name = name[i+1:]
				}
			}
		}
		p.paths = append(p.paths, operand{value: dir + name, kind: KPathWrite})
		// wget decodes %XX in the names it saves ("%2Eenvrc" is ".envrc"):
		// the decoded name is checked too.
		if dec, err := url.PathUnescape(dir + name); err != nil {
			p.deny(RiskHigh, "wget %s: the output file name has a malformed %%-escape (not checked)", clip(op.value))
		} else if dec != dir+name {
			p.paths = append(p.paths, operand{value: dec, kind: KPathWrite})
		}
	}
}

// makeFiles: make -f names the makefiles it reads.
func makeFiles(pc *parsed, dir, _ string, _ []string) []string { return optionFiles(pc, dir, "-f") }

// jsEntry: a JavaScript package manager's entry files. -w/--workspace/
// --filter members and -C/--dir/--cwd directories have their own
// package.json and .npmrc; a package.json's workspaces are read too.
func jsEntry(tool string) *entryFiles {
	names := map[string][]string{
		"npm":  {"package.json", ".npmrc"},
		"pnpm": {"package.json", ".npmrc", ".pnpmfile.cjs"},
		"yarn": {"package.json", ".npmrc", ".yarnrc", ".yarnrc.yml"},
	}[tool]
	return &entryFiles{names: names, walksUp: true, dirs: jsDirs, extra: jsWorkspaceMembers}
}

func jsDirs(pc *parsed, dir string) []string {
	var out []string
	for _, d := range pc.values("-w", "-C", "--cwd") {
		if d != "" && !strings.ContainsAny(d, "*{}@") {
			out = append(out, resolvePath(dir, d))
		}
	}
	return out
}

func jsWorkspaceMembers(_ *parsed, _, _ string, found []string) []string {
	var out []string
	for _, p := range found {
		if filepath.Base(p) == "package.json" {
			out = append(out, npmWorkspaceMembers(p)...)
		}
	}
	return out
}

// cargoManifests: --manifest-path names a Cargo.toml (relative to where
// cargo was started) and so its build.rs.
func cargoManifests(pc *parsed, _, cwd string, _ []string) []string {
	var out []string
	for _, m := range pc.values("--manifest-path") {
		m = resolvePath(cwd, m)
		out = append(out, m, filepath.Join(filepath.Dir(m), "build.rs"))
	}
	return out
}
