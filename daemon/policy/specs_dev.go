package policy

import (
	"net/url"
	"strings"
)

func registerGit() {
	R, W := KPathRead, KPathWrite
	diffOpts := opts(flags("-p|-u|--patch -s|--no-patch --raw --numstat --shortstat --name-only --name-status --summary --no-color -w|--ignore-all-space -b|--ignore-space-change --ignore-blank-lines --ignore-space-at-eol --ignore-cr-at-eol -R --no-renames --binary --full-index --no-ext-diff --textconv --no-textconv --pickaxe-all --pickaxe-regex -z -a|--text --minimal --patience --histogram --check --exit-code --quiet --no-prefix --no-relative --cc --combined-all-paths --compact-summary --patch-with-stat --patch-with-raw -W|--function-context --ita-invisible-in-index --default-prefix"),
		list(o("-U|--unified?"), o("--stat?"), o("--dirstat?"), o("--color?"), o("--word-diff?"), o("--color-words?"), o("--color-moved?"), o("-M|--find-renames?"), o("-C|--find-copies?"), o("-B|--break-rewrites?"), o("-l?"), o("--abbrev?"), o("--diff-filter="), o("-S="), o("-G="), o("-O=", R), o("--relative?"), o("--diff-algorithm="), o("--src-prefix="), o("--dst-prefix="), o("--line-prefix="), o("--submodule?"), o("--ignore-submodules?"), o("--inter-hunk-context="), o("--output=", W), o("--find-object="), o("--anchored="), o("-I|--ignore-matching-lines="),
			o("--ext-diff").denyWith("runs an external diff program")))
	logOpts := opts(diffOpts, flags("--oneline --abbrev-commit --no-abbrev-commit --graph --no-decorate --all --first-parent --merges --no-merges --reverse --follow --source --topo-order --date-order --author-date-order --left-right --cherry-pick --cherry-mark --cherry --boundary --ancestry-path --simplify-by-decoration --full-history --dense --sparse -g|--walk-reflogs --show-signature -m --mailmap --use-mailmap --no-mailmap --log-size --all-match --invert-grep -i|--regexp-ignore-case -E|--extended-regexp -F|--fixed-strings -P|--perl-regexp --basic-regexp --no-notes --stdin --not --children --parents --full-diff --remove-empty --no-min-parents --no-max-parents --expand-tabs --no-expand-tabs --clear-decorations --show-pulls --reflog --single-worktree --bisect --no-walk --do-walk --show-linear-break --exclude-first-parent-only --no-graph --show-notes-by-default -c -t --root --show-notes"),
		list(o("-n|--max-count="), o("--skip="), o("--since|--after|--since-as-filter="), o("--until|--before="), o("--author="), o("--committer="), o("--grep="), o("--grep-reflog="), o("--pretty?"), o("--format="), o("--decorate?"), o("--branches?"), o("--tags?"), o("--remotes?"), o("--glob="), o("--exclude="), o("--date="), o("-L="), o("--notes?"), o("--min-parents="), o("--max-parents="), o("--decorate-refs="), o("--decorate-refs-exclude="), o("--encoding=")))
	subcmds := subs(
		sub("status", &cmdSpec{opts: opts(flags("-s|--short -b|--branch --long -v|--verbose -z --no-column --ahead-behind --no-ahead-behind --renames --no-renames --show-stash"), list(o("--porcelain?"), o("-u|--untracked-files?"), o("--ignored?"), o("--ignore-submodules?"), o("--column?"), o("--find-renames?")))}),
		sub("log", &cmdSpec{numFlag: "-n", opts: logOpts}),
		sub("show", &cmdSpec{numFlag: "-n", opts: logOpts}),
		sub("diff", &cmdSpec{post: postGitDiff, opts: opts(diffOpts, flags("--cached|--staged --merge-base --no-index -0 -1 -2 -3 --base --ours --theirs"))}),
		sub("branch", &cmdSpec{post: postGitBranch, opts: opts(flags("-a|--all -r|--remotes -l|--list -v|--verbose --show-current -i|--ignore-case --no-color --no-abbrev --omit-empty -q|--quiet -d|--delete -D -m|--move -M -c|--copy -C -f|--force --unset-upstream --no-track --create-reflog --recurse-submodules"),
			list(o("--contains?"), o("--no-contains?"), o("--merged?"), o("--no-merged?"), o("--sort="), o("--format="), o("--points-at="), o("--color?"), o("--column?"), o("--no-column"), o("--abbrev?"), o("-u|--set-upstream-to="), o("-t|--track?"), o("--edit-description").denyWith("opens an editor")))}),
		sub("ls-files", &cmdSpec{opts: opts(flags("-c|--cached -d|--deleted -m|--modified -o|--others -i|--ignored -s|--stage -u|--unmerged -k|--killed -z -t -v -f --directory --no-empty-directory --eol --full-name --recurse-submodules --debug --deduplicate --exclude-standard --error-unmatch --sparse --resolve-undo"), list(o("--abbrev?"), o("-x|--exclude="), o("-X|--exclude-from=", R), o("--exclude-per-directory="), o("--with-tree="), o("--format=")))}),
		sub("rev-parse", &cmdSpec{opts: opts(flags("--show-toplevel --show-prefix --show-cdup --git-dir --git-common-dir --absolute-git-dir --is-inside-work-tree --is-inside-git-dir --is-bare-repository --is-shallow-repository --verify -q|--quiet --symbolic --symbolic-full-name --all --local-env-vars --sq --sq-quote --revs-only --no-revs --flags --no-flags --show-superproject-working-tree --shared-index-path --not --keep-dashdash --stop-at-non-option --stuck-long"),
			list(o("--abbrev-ref?"), o("--short?"), o("--branches?"), o("--tags?"), o("--remotes?"), o("--glob="), o("--exclude="), o("--show-object-format?"), o("--path-format="), o("--git-path="), o("--default="), o("--prefix="), o("--since|--after="), o("--until|--before="), o("--resolve-git-dir=", R), o("--disambiguate="), o("--show-ref-format")))}),
		sub("blame", &cmdSpec{post: func(p *parsed) { gitPathspecs(p, 0) }, opts: opts(flags("-l -t -s -e|--show-email -w -p|--porcelain --line-porcelain --incremental -f|--show-name -n|--show-number -c --root --show-stats --first-parent --color-lines --color-by-age --progress --no-progress --score-debug -b"),
			list(o("-L="), o("-M?"), o("-C?"), o("--date="), o("--abbrev?"), o("--reverse="), o("--contents=", R), o("--since="), o("-S=", R), o("--ignore-rev="), o("--ignore-revs-file=", R), o("--encoding=")))}),
		sub("grep", &cmdSpec{post: postGitGrep, opts: opts(flags("-i|--ignore-case -w|--word-regexp -v|--invert-match -n|--line-number -l|--files-with-matches|--name-only -L|--files-without-match -c|--count -h -H -o|--only-matching -q|--quiet -E|--extended-regexp -F|--fixed-strings -G|--basic-regexp -P|--perl-regexp --cached --untracked --no-index --index --recurse-submodules -r|--recursive --no-recursive -a|--text --full-name -z|--null --and --or --not --all-match -W|--function-context -p|--show-function --no-color --column --break --heading --textconv --no-textconv -I --exclude-standard --no-exclude-standard"),
			list(o("-e=", KPattern), o("-f=", R), o("-A|--after-context="), o("-B|--before-context="), o("-C|--context="), o("--max-depth="), o("--color?"), o("--threads="), o("-m|--max-count="), o("-O|--open-files-in-pager?").denyWith(whyPager)))}),
		sub("add", &cmdSpec{write: true, opts: opts(flags("-A|--all -u|--update -n|--dry-run -v|--verbose -f|--force -N|--intent-to-add --refresh --ignore-errors --ignore-missing --no-all --renormalize --pathspec-file-nul --sparse --no-ignore-removal --ignore-removal"), list(o("--chmod="), o("--pathspec-from-file=", R), o("-i|--interactive").denyWith("is interactive"), o("-p|--patch").denyWith("is interactive"), o("-e|--edit").denyWith("opens an editor")))}),
		sub("commit", &cmdSpec{write: true, opts: opts(flags("-a|--all --amend --no-edit -s|--signoff --no-signoff --allow-empty --allow-empty-message -n|--no-verify --verify -q|--quiet -v|--verbose --dry-run --no-status --status --no-gpg-sign -o|--only -i|--include --reset-author --pathspec-file-nul --short --porcelain --long -z|--null"),
			list(o("-m|--message="), o("-F|--file=", R), o("--author="), o("--date="), o("--fixup="), o("--squash="), o("-C|--reuse-message="), o("--cleanup="), o("--trailer="), o("--pathspec-from-file=", R), o("-u|--untracked-files?"), o("-S|--gpg-sign?"),
				o("-c|--reedit-message=").denyWith("opens an editor"), o("-e|--edit").denyWith("opens an editor"), o("-t|--template=").denyWith("opens an editor"), o("-p|--patch").denyWith("is interactive")))}),
		sub("restore", &cmdSpec{write: true, opts: opts(flags("-S|--staged -W|--worktree --ours --theirs -m|--merge --ignore-unmerged --ignore-skip-worktree-bits --overlay --no-overlay -q|--quiet --progress --no-progress --recurse-submodules --no-recurse-submodules --pathspec-file-nul"), list(o("-s|--source="), o("--conflict="), o("--pathspec-from-file=", R), o("-p|--patch").denyWith("is interactive")))}),
		sub("switch", &cmdSpec{write: true, opts: opts(flags("-d|--detach --guess --no-guess -f|--force|--discard-changes -m|--merge -q|--quiet --no-track --recurse-submodules --no-recurse-submodules --ignore-other-worktrees --progress --no-progress"), list(o("-c|--create="), o("-C|--force-create="), o("--conflict="), o("--orphan="), o("-t|--track?")))}),
		sub("checkout", &cmdSpec{write: true, opts: opts(flags("-f|--force -q|--quiet --detach --no-track -m|--merge --ours --theirs --recurse-submodules --no-recurse-submodules --overlay --no-overlay --pathspec-file-nul -l --ignore-other-worktrees --progress --no-progress --guess --no-guess --ignore-skip-worktree-bits"), list(o("-b="), o("-B="), o("-t|--track?"), o("--orphan="), o("--conflict="), o("--pathspec-from-file=", R), o("-p|--patch").denyWith("is interactive")))}),
		sub("fetch", &cmdSpec{net: true, write: true, operand: KURL, post: postGitURL, opts: opts(flags("--all -p|--prune -P|--prune-tags -t|--tags -n|--no-tags --unshallow -q|--quiet -v|--verbose -f|--force --dry-run --no-recurse-submodules --multiple --atomic --refetch --set-upstream --progress -u|--update-head-ok -4|--ipv4 -6|--ipv6 -k|--keep -a|--append --porcelain --no-write-fetch-head --write-fetch-head --no-show-forced-updates --show-forced-updates --update-shallow --no-auto-gc --auto-gc --no-auto-maintenance --auto-maintenance"),
			list(o("--depth="), o("--deepen="), o("--shallow-since="), o("--shallow-exclude="), o("--recurse-submodules?").denyWith("fetches submodules from URLs the repository names (not checked)"), o("-j|--jobs="), o("--filter="), o("--negotiation-tip="), o("-o|--server-option="), o("--refmap="), o("--upload-pack=").denyWith("runs a program on the remote side chosen by the caller")))}),
		sub("pull", &cmdSpec{net: true, write: true, operand: KURL, post: postGitURL, opts: opts(flags("--no-rebase --ff --no-ff --ff-only -q|--quiet -v|--verbose --autostash --no-autostash --all --tags --no-tags -p|--prune --squash --no-squash --commit --no-commit --no-edit --verify --no-verify --stat -n|--no-stat --signoff --no-signoff --progress -4|--ipv4 -6|--ipv6 --allow-unrelated-histories --unshallow --no-gpg-sign"),
			list(o("-r|--rebase?"), o("--depth="), o("-s|--strategy="), o("-X|--strategy-option="), o("--recurse-submodules?").denyWith("fetches submodules from URLs the repository names (not checked)"), o("-j|--jobs="), o("-S|--gpg-sign?"), o("-e|--edit").denyWith("opens an editor"), o("--upload-pack=").denyWith("runs a program on the remote side chosen by the caller")))}),
		sub("push", &cmdSpec{net: true, operand: KURL, post: postGitURL, opts: opts(flags("-u|--set-upstream -f|--force --force-if-includes --all --branches --tags --follow-tags --no-follow-tags -d|--delete -n|--dry-run --porcelain -q|--quiet -v|--verbose --prune --mirror --atomic --no-atomic --no-verify --verify --progress --no-progress -4|--ipv4 -6|--ipv6 --no-signed --no-force-with-lease"),
			list(o("--force-with-lease?"), o("-o|--push-option="), o("--recurse-submodules="), o("--signed?"), o("--repo="), o("--receive-pack=").denyWith("runs a program on the remote side chosen by the caller"), o("--exec=").denyWith("runs a program on the remote side chosen by the caller")))}),
		sub("clone", &cmdSpec{net: true, write: true, operand: KURL, hasLast: true, last: W, post: postGitClone, opts: opts(flags("--single-branch --no-single-branch --shallow-submodules --no-shallow-submodules -q|--quiet -v|--verbose --progress -n|--no-checkout --sparse --no-tags --tags --dissociate -l|--local --no-local --no-hardlinks -s|--shared --remote-submodules --no-remote-submodules --also-filter-submodules --reject-shallow --no-reject-shallow -4|--ipv4 -6|--ipv6"),
			list(o("--depth="), o("-b|--branch="), o("--recurse-submodules|--recursive?"), o("-o|--origin="), o("--filter="), o("--reference=", R), o("--reference-if-able=", R), o("--separate-git-dir=", W).denyWith(whyGitDir), o("--bare").denyWith(whyGitDir), o("--mirror").denyWith(whyGitDir), o("-j|--jobs="), o("--shallow-since="), o("--shallow-exclude="), o("--bundle-uri="), o("--server-option="), o("--revision="), o("--ref-format="),
				o("--template=").denyWith("installs hooks from a template directory"), o("-c|--config=").denyWith(whyConfig), o("-u|--upload-pack=").denyWith("runs a program chosen by the caller")))}),
		sub("config", &cmdSpec{post: postGitConfig, opts: opts(flags("-l|--list --get --get-all --get-regexp --get-urlmatch --show-origin --show-scope --name-only -z|--null --global --system --local --worktree --bool --int --bool-or-int --path --expiry-date --no-includes --no-type"), list(o("--includes").denyWith("follows include.path to files the config names (not checked)"), o("-f|--file=", R), o("--blob="), o("--type="), o("--default="), o("-e|--edit").denyWith("opens an editor")))}),
	)
	reg("git", &cmdSpec{needSub: true, subs: subcmds, opts: opts(flags("-P|--no-pager --no-replace-objects --literal-pathspecs --glob-pathspecs --noglob-pathspecs --icase-pathspecs --no-optional-locks --version --html-path --man-path --info-path --no-advice"),
		list(o("-C=", R), o("--git-dir=", R), o("--work-tree=", R), o("--namespace="), o("--list-cmds="), o("--attr-source="),
			o("--bare").denyWith("uses the directory as a bare repository, whose config the caller could have written (a config runs programs)"),
			o("-c=").denyWith(whyConfig), o("--config-env=").denyWith(whyConfig), o("--exec-path?").denyWith("changes where git finds the programs it runs"), o("-p|--paginate").denyWith(whyPager), o("--super-prefix=").denyWith("is an internal option"), o("--help")))})
	for _, s := range subcmds {
		s.index()
		if _, ok := s.optIndex["-h"]; !ok {
			s.opts = append(s.opts, o("-h"))
		}
		s.opts = append(s.opts, o("--help"))
	}
}

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

// postGoPackages: packages named by directory ("/srv/x", "../y", "./...")
// are read, recursively for "...": checked like any read (go doc /root/x
// would print root-only sources).
func postGoPackages(p *parsed) {
	for i, op := range p.operands {
		if v := op.value; strings.HasPrefix(v, "/") || strings.HasPrefix(v, ".") {
			p.operands[i].kind = KPathRead
			p.operands[i].value = strings.TrimSuffix(strings.TrimSuffix(v, "..."), "/")
			if p.operands[i].value == "" {
				p.operands[i].value = "/"
			}
			p.recursive = p.recursive || strings.HasSuffix(v, "...")
		}
	}
}

// postGoFmt: go fmt rewrites the files of the packages it is given. Packages
// named by directory or file are checked as writes; an import path ("std",
// "golang.org/x/...") may name the standard library or the module cache.
func postGoFmt(p *parsed) {
	for i, op := range p.operands {
		v := op.value
		if strings.HasPrefix(v, ".") || strings.HasPrefix(v, "/") || strings.HasSuffix(v, ".go") {
			p.operands[i].kind = KPathWrite
			continue
		}
		p.deny(RiskHigh, "go fmt %s: an import path may name packages outside the workspace (the standard library, the module cache); name packages by directory (./..., ./pkg)", clip(v))
	}
}

const whyGitDir = "creates a repository whose config is not in a .git directory (a writable config runs programs)"

// gitPathspecs checks git's file arguments from operand i on as reads
// (revisions name no file and pass); pathspec magic (":(top)x", ":/x",
// ":!x") is refused, since it names files the check cannot resolve.
func gitPathspecs(p *parsed, from int) {
	for i := from; i < len(p.operands); i++ {
		v := p.operands[i].value
		if len(v) > 1 && v[0] == ':' && strings.IndexByte("(/!^", v[1]) >= 0 {
			p.deny(RiskHigh, "%s %s: pathspec magic is not checked; name the files plainly", p.cmdName(), clip(v))
			continue
		}
		p.operands[i].kind = KPathRead
	}
}

func postGitGrep(p *parsed) {
	postPatternFirst("-e", "-f")(p)
	from := 0
	if len(p.operands) > 0 && p.operands[0].kind == KPattern {
		from = 1
	}
	gitPathspecs(p, from)
}

// postGitDiff: every operand is checked as a read. Besides --no-index, git
// compares two files outside its work tree on its own ("git diff /etc/shadow
// /dev/null" prints the file); revisions are names that resolve to nothing.
func postGitDiff(p *parsed) {
	gitPathspecs(p, 0)
}

func postGitBranch(p *parsed) {
	if p.has("-d", "-D", "-m", "-M", "-c", "-C", "-f", "-u", "--unset-upstream", "-t", "--no-track", "--create-reflog") {
		p.write = true
	}
	if len(p.operands) > 0 && !p.has("-l", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at") {
		p.write = true
	}
}

func postGitConfig(p *parsed) {
	if p.has("-l", "--get", "--get-all", "--get-regexp", "--get-urlmatch") {
		return
	}
	switch {
	case len(p.operands) == 0:
		return
	case p.operands[0].value == "get" || p.operands[0].value == "list":
		return
	case len(p.operands) == 1 && strings.Contains(p.operands[0].value, ".") && !strings.HasPrefix(p.operands[0].value, "-"):
		return // `git config name` prints the value
	}
	p.deny(RiskHigh, "git config: writing configuration (git config can run programs: core.fsmonitor, aliases, hooks)")
}

func checkGitURL(p *parsed, v string) {
	l := strings.ToLower(v)
	if strings.HasPrefix(l, "ext::") || strings.HasPrefix(l, "fd::") || strings.Contains(l, "::") && !strings.Contains(l, "://") {
		p.deny(RiskCritical, "%s: remote %q uses a transport helper that runs commands", p.cmdName(), clip(v))
	}
	if strings.HasPrefix(v, "-") {
		p.deny(RiskCritical, "%s: remote %q looks like an option", p.cmdName(), clip(v))
	}
}

// gitLocalPath returns the directory a repository argument names on this
// machine (a path or a file:// URL), or "".
func gitLocalPath(v string, bareNameIsRemote bool) string {
	l := strings.ToLower(v)
	if strings.HasPrefix(l, "file://") {
		// git ignores the host of a file:// URL: file://any-host/x is /x.
		rest := v[len("file://"):]
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			return rest[i:]
		}
		return "/"
	}
	if strings.Contains(v, "://") {
		return ""
	}
	if i := strings.IndexByte(v, ':'); i >= 0 && !strings.Contains(v[:i], "/") {
		return "" // scp-like host:path
	}
	if bareNameIsRemote && !strings.Contains(v, "/") && v != "." && v != ".." {
		return "" // a remote name
	}
	return v
}

func postGitURL(p *parsed) {
	for i := range p.operands {
		p.operands[i].kind = KOther // remote names and refspecs
		if i == 0 {
			checkGitURL(p, p.operands[i].value)
			if lp := gitLocalPath(p.operands[i].value, true); lp != "" {
				// fetching from a local repository reads it
				p.paths = append(p.paths, operand{value: lp, kind: KPathRead})
			}
		}
	}
}

func postGitClone(p *parsed) {
	if len(p.operands) == 0 {
		p.deny(RiskLow, "git clone: missing repository")
		return
	}
	checkGitURL(p, p.operands[0].value)
	p.operands[0].kind = KURL
	if lp := gitLocalPath(p.operands[0].value, false); lp != "" {
		p.paths = append(p.paths, operand{value: lp, kind: KPathRead})
	}
	for _, b := range p.values("--bundle-uri") {
		if lp := gitLocalPath(b, false); lp != "" {
			p.paths = append(p.paths, operand{value: lp, kind: KPathRead})
		} else if l := strings.ToLower(b); !strings.HasPrefix(l, "https://") && !strings.HasPrefix(l, "http://") {
			p.deny(RiskHigh, "git clone --bundle-uri=%s: only http(s) URLs and local files are accepted", clip(b))
		}
	}
	if p.has("--recurse-submodules") {
		p.deny(RiskHigh, "git clone --recurse-submodules: the submodules' URLs come from the repository (a local path reads any repository) and are not checked; clone, then look at .gitmodules")
	}
	if len(p.operands) == 1 {
		// clones into ./<name>, named as git does: without a trailing
		// "/.git", "/" or ".git", and (newer git) without surrounding blanks.
		// Both spellings are checked; a source whose name cannot be told is
		// refused rather than guessed.
		for _, src := range []string{p.operands[0].value, strings.TrimSpace(p.operands[0].value)} {
			name := gitCloneName(src)
			if name == "" || name == "." || name == ".." {
				p.deny(RiskHigh, "git clone %s: the directory git would clone into cannot be told from this source; name the destination directory", clip(p.operands[0].value))
				return
			}
			p.operands = append(p.operands, operand{value: name, kind: KPathWrite})
		}
	}
}

// gitCloneName is the directory "git clone SRC" creates.
func gitCloneName(src string) string {
	s := strings.TrimRight(src, "/")
	for strings.HasSuffix(s, "/.git") {
		s = strings.TrimRight(strings.TrimSuffix(s, "/.git"), "/")
	}
	name := baseName(s)
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		name = name[i+1:]
	}
	name = strings.TrimSuffix(strings.TrimSuffix(name, ".bundle"), ".git")
	return name
}

func registerBuildTools() {
	R, W := KPathRead, KPathWrite
	buildFlags := opts(flags("-v -x -n -a -race -msan -asan -cover -trimpath -linkshared -modcacherw -work -json -i"),
		list(o("-buildvcs?"), o("-covermode="), o("-coverpkg="), o("-p="), o("-tags="), o("-ldflags="), o("-gcflags="), o("-asmflags="), o("-buildmode="), o("-compiler=").denyWith("chooses the compiler program"), o("-gccgoflags=").denyWith("passes options to gccgo, which may name programs to run"), o("-installsuffix="), o("-mod="), o("-modfile=", R), o("-overlay=").denyWith("replaces files with the files a JSON file names (not checked)"), o("-pgo=", R), o("-pkgdir=", W), o("-o=", W), o("-C=", R),
			o("-toolexec=").denyWith("runs a program around every compiler step"), o("-exec=").denyWith("runs a program around the binary"), o("-vettool=").denyWith("runs a vet program chosen by the caller")))
	testFlags := opts(buildFlags, flags("-benchmem -failfast -short -c -fullpath -cpuprofile"), list(o("-run="), o("-skip="), o("-bench="), o("-benchtime="), o("-count="), o("-cpu="), o("-fuzz="), o("-fuzztime="), o("-fuzzminimizetime="), o("-list="), o("-parallel="), o("-shuffle="), o("-timeout="), o("-vet="), o("-coverprofile=", W), o("-memprofile=", W), o("-blockprofile=", W), o("-mutexprofile=", W), o("-outputdir=", W), o("-trace=", W), o("-memprofilerate="), o("-blockprofilerate="), o("-mutexprofilefraction="), o("-test.v?"), o("-test.run=")))
	// -cpuprofile takes a value; fix the flag above
	for i, op := range testFlags {
		if op.names[0] == "-cpuprofile" {
			testFlags[i] = o("-cpuprofile=", W)
		}
	}
	goSub := func(name string, c *cmdSpec) *cmdSpec {
		c.name = name
		c.longSingleDash = true
		c.opts = append(c.opts, o("-h|-help"))
		return c
	}
	modSubs := subs(
		goSub("download", &cmdSpec{net: true, opts: list(o("-json"), o("-x"), o("-reuse=", R))}),
		goSub("tidy", &cmdSpec{net: true, write: true, opts: list(o("-v"), o("-e"), o("-x"), o("-diff"), o("-go="), o("-compat="))}),
		goSub("graph", &cmdSpec{opts: list(o("-x"), o("-go="))}),
		goSub("why", &cmdSpec{opts: list(o("-m"), o("-vendor"))}),
		goSub("verify", &cmdSpec{}),
		goSub("init", &cmdSpec{write: true}),
		goSub("vendor", &cmdSpec{write: true, net: true, opts: list(o("-v"), o("-e"), o("-o=", W))}),
		goSub("edit", &cmdSpec{write: true, operand: W, opts: list(o("-fmt"), o("-print"), o("-json"), o("-module="), o("-go="), o("-toolchain="), o("-require="), o("-droprequire="), o("-exclude="), o("-dropexclude="), o("-replace="), o("-dropreplace="), o("-retract="), o("-dropretract="), o("-tool="), o("-droptool="), o("-godebug="), o("-dropgodebug="))}),
	)
	goSubs := subs(
		goSub("build", &cmdSpec{code: true, write: true, opts: buildFlags}),
		goSub("install", &cmdSpec{code: true, write: true, net: true, opts: buildFlags}),
		goSub("test", &cmdSpec{code: true, restMarker: "-args", opts: testFlags}),
		goSub("run", &cmdSpec{code: true, posix: true, opts: buildFlags}),
		goSub("vet", &cmdSpec{post: postGoPackages, opts: buildFlags}),
		goSub("fmt", &cmdSpec{write: true, post: postGoFmt, opts: list(o("-n"), o("-x"), o("-mod="))}),
		goSub("env", &cmdSpec{opts: list(o("-json"), o("-changed"), o("-w").denyWith("writes the go env file that later go commands obey"), o("-u").denyWith("writes the go env file that later go commands obey"))}),
		goSub("version", &cmdSpec{operand: R, post: func(p *parsed) { p.recursive = true }, opts: list(o("-m"), o("-v"), o("-json"))}),
		goSub("list", &cmdSpec{post: postGoPackages, opts: opts(buildFlags, list(o("-f="), o("-m"), o("-u"), o("-e"), o("-deps"), o("-test"), o("-find"), o("-export").runsCode(), o("-compiled").runsCode(), o("-versions"), o("-retracted"), o("-reuse=", R)))}),
		goSub("mod", &cmdSpec{needSub: true, subs: modSubs}),
		goSub("get", &cmdSpec{net: true, write: true, opts: opts(buildFlags, list(o("-t"), o("-u?"), o("-tool")))}),
		goSub("doc", &cmdSpec{post: postGoPackages, opts: list(o("-all"), o("-c"), o("-cmd"), o("-short"), o("-src"), o("-u"), o("-http").denyWith("starts a web server"))}),
		goSub("generate", &cmdSpec{code: true, write: true, opts: opts(buildFlags, list(o("-run="), o("-skip=")))}),
		goSub("clean", &cmdSpec{write: true, opts: opts(buildFlags, list(o("-cache"), o("-testcache"), o("-modcache"), o("-fuzzcache"), o("-r")))}),
		goSub("tool", &cmdSpec{code: true, posix: true, opts: list(o("-n"), o("-modfile=", R))}),
	)
	reg("go", &cmdSpec{needSub: true, subs: goSubs, longSingleDash: true, opts: list(o("-C=", R), o("-h|-help"))})

	reg("make|gmake", &cmdSpec{code: true, write: true, operand: KOther, post: postMake, opts: opts(flags("-k|--keep-going -s|--silent|--quiet --no-silent -n|--dry-run|--just-print|--recon -B|--always-make -i|--ignore-errors -e|--environment-overrides -q|--question -r|--no-builtin-rules -R|--no-builtin-variables -w|--print-directory --no-print-directory -t|--touch -d -p|--print-data-base --trace --warn-undefined-variables -L|--check-symlink-times -S|--no-keep-going|--stop -v|--version -h|--help"),
		list(o("-C|--directory=", R), o("-f|--file|--makefile=", R), o("-j|--jobs?"), o("-l|--load-average|--max-load?"), o("-O|--output-sync?"), o("-W|--what-if|--new-file|--assume-new=", R), o("-o|--old-file|--assume-old=", R), o("--debug?"), o("-I|--include-dir=", R), o("--shuffle?"), o("--jobserver-style="),
			o("-E|--eval=").denyWith("evaluates make code given on the command line")))})

	// JavaScript package managers. Options may appear anywhere.
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
		reg(tool, &cmdSpec{needSub: true, subs: m, aliases: al, opts: jsGlobal})
	}
	js("npm")
	js("pnpm")
	js("yarn")

	cargoGlobal := opts(flags("-v|--verbose -q|--quiet --frozen --locked --offline -h|--help -V|--version --list"), list(o("--color="), o("--manifest-path=", R), o("--config=").denyWith(whyConfig), o("-Z=").denyWith("enables unstable features"), o("-C=").denyWith("is an unstable option")))
	cargoSub := opts(flags("--workspace --all --lib --bins --examples --tests --benches --all-targets --all-features --no-default-features -r|--release --keep-going --no-run --no-fail-fast --doc --future-incompat-report --ignore-rust-version --unit-graph --no-deps --all-packages --fix --allow-dirty --allow-staged --allow-no-vcs --dry-run --document-private-items --check"),
		list(o("-p|--package="), o("--exclude="), o("--bin="), o("--example="), o("--test="), o("--bench="), o("-F|--features="), o("--profile="), o("-j|--jobs="), o("--target="), o("--target-dir=", W), o("--message-format="), o("--timings?"), o("--format-version="), o("--depth="), o("-e|--edges="), o("-i|--invert="), o("--prefix="), o("--charset="), o("--filter-platform="), o("--open").denyWith("opens a browser")))
	cs := func(name string, c *cmdSpec) *cmdSpec { c.name = name; c.inherit = true; c.opts = cargoSub; return c }
	reg("cargo", &cmdSpec{needSub: true, opts: cargoGlobal, aliases: map[string]string{"b": "build", "t": "test", "r": "run", "c": "check", "d": "doc"},
		subs: subs(cs("build", &cmdSpec{code: true, net: true, write: true}), cs("test", &cmdSpec{code: true, net: true, write: true}), cs("run", &cmdSpec{code: true, net: true, write: true}),
			cs("check", &cmdSpec{code: true, net: true, write: true}), cs("clippy", &cmdSpec{code: true, net: true, write: true}), cs("doc", &cmdSpec{code: true, net: true, write: true}), cs("bench", &cmdSpec{code: true, net: true, write: true}),
			// A repository's .cargo/config.toml and rust-toolchain.toml choose the
			// programs cargo runs (rustc, wrappers, runners): every cargo command
			// in a checkout runs project-chosen code.
			cs("fmt", &cmdSpec{code: true, write: true}), cs("fetch", &cmdSpec{code: true, net: true}), cs("tree", &cmdSpec{code: true, net: true}), cs("metadata", &cmdSpec{code: true, net: true}), cs("clean", &cmdSpec{code: true, write: true}), cs("update", &cmdSpec{code: true, net: true, write: true}), cs("version", &cmdSpec{}))})

	reg("pytest|py.test", &cmdSpec{code: true, write: true, operand: KOther, post: postPytest, opts: opts(flags("-x|--exitfirst -q|--quiet -v|--verbose -s -l|--showlocals --lf|--last-failed --ff|--failed-first --nf|--new-first --sw|--stepwise --co|--collect-only --disable-warnings --noconftest --strict-markers --no-header --no-summary --cache-clear --setup-show --fixtures -h|--help --version --runxfail"),
		list(o("-k="), o("-m="), o("--maxfail="), o("--capture="), o("--tb="), o("-r="), o("--durations="), o("-W|--pythonwarnings="), o("--junitxml|--junit-xml=", W), o("--rootdir=", R), o("-c=", R), o("--confcutdir=", R), o("--ignore=", R), o("--deselect="), o("--import-mode="), o("--basetemp=", W), o("-n|--numprocesses="), o("--color="), o("--timeout="),
			o("--pdb").denyWith("starts an interactive debugger"), o("--pdbcls=").denyWith("loads a debugger class"), o("-p=").denyWith("loads a plugin module chosen by the caller"), o("-o|--override-ini=").denyWith("overrides configuration (addopts, plugins)")))})
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
