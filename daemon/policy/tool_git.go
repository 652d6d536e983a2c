package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

var _ = family(registerGit)

// registerGit: git, its subcommands, and what it reads and is forced to
// run with (hooks, pagers, editors and external programs off).
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
		sub("branch", &cmdSpec{plainWrite: true, post: postGitBranch, opts: opts(flags("-a|--all -r|--remotes -l|--list -v|--verbose --show-current -i|--ignore-case --no-color --no-abbrev --omit-empty -q|--quiet -d|--delete -D -m|--move -M -c|--copy -C -f|--force --unset-upstream --no-track --create-reflog --recurse-submodules"),
			list(o("--contains?"), o("--no-contains?"), o("--merged?"), o("--no-merged?"), o("--sort="), o("--format="), o("--points-at="), o("--color?"), o("--column?"), o("--no-column"), o("--abbrev?"), o("-u|--set-upstream-to="), o("-t|--track?"), o("--edit-description").denyWith("opens an editor")))}),
		sub("ls-files", &cmdSpec{opts: opts(flags("-c|--cached -d|--deleted -m|--modified -o|--others -i|--ignored -s|--stage -u|--unmerged -k|--killed -z -t -v -f --directory --no-empty-directory --eol --full-name --recurse-submodules --debug --deduplicate --exclude-standard --error-unmatch --sparse --resolve-undo"), list(o("--abbrev?"), o("-x|--exclude="), o("-X|--exclude-from=", R), o("--exclude-per-directory="), o("--with-tree="), o("--format=")))}),
		sub("rev-parse", &cmdSpec{opts: opts(flags("--show-toplevel --show-prefix --show-cdup --git-dir --git-common-dir --absolute-git-dir --is-inside-work-tree --is-inside-git-dir --is-bare-repository --is-shallow-repository --verify -q|--quiet --symbolic --symbolic-full-name --all --local-env-vars --sq --sq-quote --revs-only --no-revs --flags --no-flags --show-superproject-working-tree --shared-index-path --not --keep-dashdash --stop-at-non-option --stuck-long"),
			list(o("--abbrev-ref?"), o("--short?"), o("--branches?"), o("--tags?"), o("--remotes?"), o("--glob="), o("--exclude="), o("--show-object-format?"), o("--path-format="), o("--git-path="), o("--default="), o("--prefix="), o("--since|--after="), o("--until|--before="), o("--resolve-git-dir=", R), o("--disambiguate="), o("--show-ref-format")))}),
		sub("blame", &cmdSpec{post: func(p *parsed) { gitPathspecs(p, 0) }, opts: opts(flags("-l -t -s -e|--show-email -w -p|--porcelain --line-porcelain --incremental -f|--show-name -n|--show-number -c --root --show-stats --first-parent --color-lines --color-by-age --progress --no-progress --score-debug -b"),
			list(o("-L="), o("-M?"), o("-C?"), o("--date="), o("--abbrev?"), o("--reverse="), o("--contents=", R), o("--since="), o("-S=", R), o("--ignore-rev="), o("--ignore-revs-file=", R), o("--encoding=")))}),
		sub("grep", &cmdSpec{post: postGitGrep, opts: opts(flags("-i|--ignore-case -w|--word-regexp -v|--invert-match -n|--line-number -l|--files-with-matches|--name-only -L|--files-without-match -c|--count -h -H -o|--only-matching -q|--quiet -E|--extended-regexp -F|--fixed-strings -G|--basic-regexp -P|--perl-regexp --cached --untracked --no-index --index --recurse-submodules -r|--recursive --no-recursive -a|--text --full-name -z|--null --and --or --not --all-match -W|--function-context -p|--show-function --no-color --column --break --heading --textconv --no-textconv -I --exclude-standard --no-exclude-standard"),
			list(o("-e=", KPattern), o("-f=", R), o("-A|--after-context="), o("-B|--before-context="), o("-C|--context="), o("--max-depth="), o("--color?"), o("--threads="), o("-m|--max-count="), o("-O|--open-files-in-pager?").denyWith(whyPager)))}),
		sub("add", &cmdSpec{write: true, plainWrite: true, interactive: true, opts: opts(flags("-A|--all -u|--update -n|--dry-run -v|--verbose -f|--force -N|--intent-to-add --refresh --ignore-errors --ignore-missing --no-all --renormalize --pathspec-file-nul --sparse --no-ignore-removal --ignore-removal"), list(o("--chmod="), o("--pathspec-from-file=", R), o("-i|--interactive").denyWith("is interactive").onTerminal(), o("-p|--patch").denyWith("is interactive").onTerminal(), o("-e|--edit").denyWith("opens an editor")))}),
		sub("commit", &cmdSpec{write: true, plainWrite: true, opts: opts(flags("-a|--all --no-edit -s|--signoff --no-signoff --allow-empty --allow-empty-message -n|--no-verify --verify -q|--quiet -v|--verbose --dry-run --no-status --status --no-gpg-sign -o|--only -i|--include --reset-author --pathspec-file-nul --short --porcelain --long -z|--null"),
			list(o("--amend").notPlainWrite("rewrites the last commit (history)"), o("-m|--message="), o("-F|--file=", R), o("--author="), o("--date="), o("--fixup="), o("--squash="), o("-C|--reuse-message="), o("--cleanup="), o("--trailer="), o("--pathspec-from-file=", R), o("-u|--untracked-files?"), o("-S|--gpg-sign?"),
				o("-c|--reedit-message=").denyWith("opens an editor"), o("-e|--edit").denyWith("opens an editor"), o("-t|--template=").denyWith("opens an editor"), o("-p|--patch").denyWith("is interactive")))}),
		sub("restore", &cmdSpec{write: true, opts: opts(flags("-S|--staged -W|--worktree --ours --theirs -m|--merge --ignore-unmerged --ignore-skip-worktree-bits --overlay --no-overlay -q|--quiet --progress --no-progress --recurse-submodules --no-recurse-submodules --pathspec-file-nul"), list(o("-s|--source="), o("--conflict="), o("--pathspec-from-file=", R), o("-p|--patch").denyWith("is interactive")))}),
		// git switch refuses to discard local changes unless told to.
		sub("switch", &cmdSpec{write: true, plainWrite: true, opts: opts(flags("-d|--detach --guess --no-guess -q|--quiet --no-track --recurse-submodules --no-recurse-submodules --ignore-other-worktrees --progress --no-progress"),
			list(o("-f|--force|--discard-changes").notPlainWrite(whyDiscards), o("-m|--merge").notPlainWrite("merges local changes into the other branch's files (conflicts rewrite them)"), o("-c|--create="), o("-C|--force-create=").notPlainWrite("resets an existing branch"), o("--conflict="), o("--orphan=").notPlainWrite("empties the work tree of tracked files"), o("-t|--track?")))}),
		sub("checkout", &cmdSpec{write: true, plainWrite: true, post: postGitCheckout, opts: opts(flags("-f|--force -q|--quiet --detach --no-track -m|--merge --ours --theirs --recurse-submodules --no-recurse-submodules --overlay --no-overlay --pathspec-file-nul -l --ignore-other-worktrees --progress --no-progress --guess --no-guess --ignore-skip-worktree-bits"), list(o("-b="), o("-B="), o("-t|--track?"), o("--orphan="), o("--conflict="), o("--pathspec-from-file=", R), o("-p|--patch").denyWith("is interactive")))}),
		sub("fetch", &cmdSpec{net: true, write: true, operand: KURL, post: postGitURL, opts: opts(flags("--all -p|--prune -P|--prune-tags -t|--tags -n|--no-tags --unshallow -q|--quiet -v|--verbose -f|--force --dry-run --no-recurse-submodules --multiple --atomic --refetch --set-upstream --progress -u|--update-head-ok -4|--ipv4 -6|--ipv6 -k|--keep -a|--append --porcelain --no-write-fetch-head --write-fetch-head --no-show-forced-updates --show-forced-updates --update-shallow --no-auto-gc --auto-gc --no-auto-maintenance --auto-maintenance"),
			list(o("--depth="), o("--deepen="), o("--shallow-since="), o("--shallow-exclude="), o("--recurse-submodules?").denyWith("fetches submodules from URLs the repository names (not checked)"), o("-j|--jobs="), o("--filter="), o("--negotiation-tip="), o("-o|--server-option="), o("--refmap="), o("--upload-pack=").denyWith("runs a program on the remote side chosen by the caller")))}),
		sub("ls-remote", &cmdSpec{net: true, operand: KURL, post: postGitURL, opts: opts(flags("--heads --tags -t -b|--branches --refs -q|--quiet --exit-code --get-url --symref"),
			list(o("--sort="), o("-o|--server-option="), o("--upload-pack=").denyWith("runs a program on the remote side chosen by the caller")))}),
		sub("pull", &cmdSpec{net: true, write: true, operand: KURL, post: postGitURL, opts: opts(flags("--no-rebase --ff --no-ff --ff-only -q|--quiet -v|--verbose --autostash --no-autostash --all --tags --no-tags -p|--prune --squash --no-squash --commit --no-commit --no-edit --verify --no-verify --stat -n|--no-stat --signoff --no-signoff --progress -4|--ipv4 -6|--ipv6 --allow-unrelated-histories --unshallow --no-gpg-sign"),
			list(o("-r|--rebase?"), o("--depth="), o("-s|--strategy="), o("-X|--strategy-option="), o("--recurse-submodules?").denyWith("fetches submodules from URLs the repository names (not checked)"), o("-j|--jobs="), o("-S|--gpg-sign?"), o("-e|--edit").denyWith("opens an editor"), o("--upload-pack=").denyWith("runs a program on the remote side chosen by the caller")))}),
		sub("push", &cmdSpec{net: true, operand: KURL, post: postGitURL, opts: opts(flags("-u|--set-upstream -f|--force --force-if-includes --all --branches --tags --follow-tags --no-follow-tags -d|--delete -n|--dry-run --porcelain -q|--quiet -v|--verbose --prune --mirror --atomic --no-atomic --no-verify --verify --progress --no-progress -4|--ipv4 -6|--ipv6 --no-signed --no-force-with-lease"),
			list(o("--force-with-lease?"), o("-o|--push-option="), o("--recurse-submodules="), o("--signed?"), o("--repo="), o("--receive-pack=").denyWith("runs a program on the remote side chosen by the caller"), o("--exec=").denyWith("runs a program on the remote side chosen by the caller")))}),
		sub("clone", &cmdSpec{net: true, write: true, operand: KURL, hasLast: true, last: W, post: postGitClone, opts: opts(flags("--single-branch --no-single-branch --shallow-submodules --no-shallow-submodules -q|--quiet -v|--verbose --progress -n|--no-checkout --sparse --no-tags --tags --dissociate -l|--local --no-local --no-hardlinks -s|--shared --remote-submodules --no-remote-submodules --also-filter-submodules --reject-shallow --no-reject-shallow -4|--ipv4 -6|--ipv6"),
			list(o("--depth="), o("-b|--branch="), o("--recurse-submodules|--recursive?"), o("-o|--origin="), o("--filter="), o("--reference=", R), o("--reference-if-able=", R), o("--separate-git-dir=", W).denyWith(whyGitDir), o("--bare").denyWith(whyGitDir), o("--mirror").denyWith(whyGitDir), o("-j|--jobs="), o("--shallow-since="), o("--shallow-exclude="), o("--bundle-uri="), o("--server-option="), o("--revision="), o("--ref-format="),
				o("--template=").denyWith("installs hooks from a template directory"), o("-c|--config=").denyWith(whyConfig), o("-u|--upload-pack=").denyWith("runs a program chosen by the caller")))}),
		sub("stash", gitStash(logOpts, diffOpts)),
		sub("reset", &cmdSpec{write: true, plainWrite: true, post: func(p *parsed) { gitPathspecs(p, 0) }, opts: opts(flags("--soft --mixed -q|--quiet --no-refresh --refresh -N|--intent-to-add --recurse-submodules --no-recurse-submodules --pathspec-file-nul"),
			list(o("--hard").notPlainWrite(whyDiscards), o("--merge").notPlainWrite(whyDiscards), o("--keep").notPlainWrite(whyDiscards), o("--pathspec-from-file=", R), o("-p|--patch").denyWith("is interactive").onTerminal()))}),
		sub("merge", &cmdSpec{write: true, plainWrite: true, operand: KOther, opts: opts(mergeOpts, flags("--commit --no-commit --ff --squash --no-squash --stat -n|--no-stat --summary --log --no-log --verify-signatures --no-verify-signatures --allow-unrelated-histories --continue --quit --overwrite-ignore --no-overwrite-ignore"),
			list(o("-m|--message="), o("-F|--file=", R), o("--into-name="), o("--abort").notPlainWrite("abandons the merge and the changes made for it")))}),
		sub("rebase", &cmdSpec{write: true, operand: KOther, opts: opts(mergeOpts, flags("--continue --skip --quit --abort --keep-base --root --autosquash --no-autosquash --committer-date-is-author-date --ignore-date --reset-author-date --update-refs --no-update-refs --fork-point --no-fork-point --force-rebase -f --keep-empty --no-keep-empty --apply -m|--merge -i|--interactive --reschedule-failed-exec --no-reschedule-failed-exec --show-current-patch --ignore-whitespace --stat -n|--no-stat --edit-todo --no-rebase-merges"),
			list(o("--onto="), o("--empty="), o("-r|--rebase-merges?"), o("--whitespace="), o("-C="), o("-x|--exec=").denyWith("runs a shell command string after each commit (send the commands as argv instead)")))}),
		sub("cherry-pick", &cmdSpec{write: true, plainWrite: true, operand: KOther, opts: opts(mergeOpts, flags("--continue --skip --quit -x -r --allow-empty --allow-empty-message --keep-redundant-commits"),
			list(o("-n|--no-commit"), o("--ff"), o("-m|--mainline="), o("--empty="), o("--abort").notPlainWrite("abandons the cherry-pick and the changes made for it")))}),
		sub("revert", &cmdSpec{write: true, plainWrite: true, operand: KOther, opts: opts(flags("--continue --skip --quit -n|--no-commit -s|--signoff --no-signoff --no-edit --no-gpg-sign --rerere-autoupdate --no-rerere-autoupdate --reference"),
			list(o("-m|--mainline="), o("--cleanup="), o("--strategy="), o("-X|--strategy-option="), o("-S|--gpg-sign?"), o("-e|--edit").denyWith("opens an editor"), o("--abort").notPlainWrite("abandons the revert and the changes made for it")))}),
		sub("tag", &cmdSpec{plainWrite: true, operand: KOther, post: postGitTag, opts: opts(flags("-a|--annotate -s|--sign --no-sign -f|--force -v|--verify -l|--list -i|--ignore-case --omit-empty --create-reflog --no-column"),
			list(o("-n?"), o("-u|--local-user="), o("-m|--message="), o("-F|--file=", R), o("--cleanup="), o("--sort="), o("--contains?"), o("--no-contains?"), o("--merged?"), o("--no-merged?"), o("--points-at="), o("--format="), o("--color?"), o("--column?"), o("--trailer="),
				o("-d|--delete").notPlainWrite("deletes tags"), o("-e|--edit").denyWith("opens an editor")))}),
		sub("clean", &cmdSpec{post: postGitClean, opts: opts(flags("-d -f|--force -n|--dry-run -q|--quiet -x -X"), list(o("-e|--exclude="), o("-i|--interactive").denyWith("is interactive").onTerminal()))}),
		sub("apply", &cmdSpec{operand: R, post: postGitApply, opts: opts(flags("--stat --numstat --summary --check --index --cached --intent-to-add -3|--3way --ours --theirs --union -R|--reverse --reject -z --unidiff-zero --apply --no-add --allow-binary-replacement --binary --recount --inaccurate-eof -v|--verbose -q|--quiet --allow-empty --ignore-space-change --ignore-whitespace --allow-overlap"),
			list(o("-p="), o("-C="), o("--exclude="), o("--include="), o("--whitespace="), o("--directory="), o("--build-fake-ancestor=", W)))}),
		sub("remote", gitRemote()),
		sub("describe", &cmdSpec{operand: KOther, opts: opts(flags("--all --tags --long --always --first-parent --exact-match --debug --contains"), list(o("--abbrev?"), o("--candidates="), o("--match="), o("--exclude="), o("--dirty?"), o("--broken?")))}),
		sub("shortlog", &cmdSpec{opts: opts(flags("-n|--numbered -s|--summary -e|--email -c|--committer --all --no-merges --merges --first-parent --reverse --mailmap --no-mailmap"), list(o("--since|--after="), o("--until|--before="), o("--author="), o("--group="), o("--format="), o("-w?")))}),
		sub("reflog", gitReflog(logOpts)),
		sub("worktree", gitWorktree()),
		sub("bisect", gitBisect()),
		sub("config", &cmdSpec{post: postGitConfig, opts: opts(flags("-l|--list --get --get-all --get-regexp --get-urlmatch --show-origin --show-scope --name-only -z|--null --global --system --local --worktree --bool --int --bool-or-int --path --expiry-date --no-includes --no-type"), list(o("--includes").denyWith("follows include.path to files the config names (not checked)"), o("-f|--file=", R), o("--blob="), o("--type="), o("--default="), o("-e|--edit").denyWith("opens an editor")))}),
	)
	register("git", &toolSpec{chdir: "-C", fixedReads: gitFixedReads, derivedReads: gitDiffReads, check: checkGit, childEnv: gitConfigEnv, forced: forceGit,
		execArgs: gitExecArgs, execEnv: gitExecEnv, sandboxExec: []string{"/usr/lib/git-core"}, // git runs its own helpers (a read-only sandbox executes nothing else)
		grammar: &cmdSpec{needSub: true, subs: subcmds, opts: opts(flags("-P|--no-pager --no-replace-objects --literal-pathspecs --glob-pathspecs --noglob-pathspecs --icase-pathspecs --no-optional-locks --version --html-path --man-path --info-path --no-advice"),
			list(o("-C=", R).movesDir(), o("--git-dir=", R).movesDir(), o("--work-tree=", R).movesDir(), o("--namespace="), o("--list-cmds="), o("--attr-source="),
				o("--bare").denyWith("uses the directory as a bare repository, whose config the caller could have written (a config runs programs)"),
				o("-c=").denyWith(whyConfig), o("--config-env=").denyWith(whyConfig), o("--exec-path?").denyWith("changes where git finds the programs it runs"), o("-p|--paginate").denyWith(whyPager), o("--super-prefix=").denyWith("is an internal option"), o("--help")))}})
	var addHelp func(m map[string]*cmdSpec)
	addHelp = func(m map[string]*cmdSpec) {
		for _, s := range m {
			s.index()
			if _, ok := s.optIndex["-h"]; !ok {
				s.opts = append(s.opts, o("-h"))
			}
			if _, ok := s.optIndex["--help"]; !ok {
				s.opts = append(s.opts, o("--help"))
			}
			addHelp(s.subs)
		}
	}
	addHelp(subcmds)
}

// gitExecArgs: every git command (and, as GIT_CONFIG_*, every git a tool
// runs: gitConfigEnv) runs without hooks, fsmonitor, pagers, editors,
// credential helpers or the ext:: transport, never uses a bare repository
// it was not pointed at, and runs only the ssh and gpg found in PATH.
var gitExecArgs = [][]string{
	{"-c", "core.hooksPath=/dev/null"}, {"-c", "core.fsmonitor=false"}, {"-c", "safe.bareRepository=explicit"}, {"-c", "core.pager=cat"},
	{"-c", "core.sshCommand=ssh"}, {"-c", "credential.helper="}, {"-c", "protocol.ext.allow=never"}, {"-c", "core.editor=true"},
	{"-c", "sequence.editor=true"}, {"-c", "gpg.program=gpg"}, {"-c", "core.askPass="}, {"--no-pager"},
}

// gitExecEnv: no system or global config (the caller's ~/.gitconfig could
// set hooks or helpers: daemon/broker/gitidentity.go supplies the identity
// as the global config instead), no prompts, pagers or editors, only the
// network and file transports, no replace objects, and no lazy fetch (a
// partial clone must not fetch from its remote in a command classified
// offline).
var gitExecEnv = map[string]string{
	"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "GIT_EDITOR": "true",
	"GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh", "GIT_NO_REPLACE_OBJECTS": "1", "GIT_NO_LAZY_FETCH": "1",
}

const whyDiscards = "discards changes in the work tree"

// mergeOpts: the options merge, rebase and cherry-pick share.
var mergeOpts = opts(flags("--no-ff --ff-only -q|--quiet -v|--verbose --progress --no-progress --autostash --no-autostash --signoff --no-signoff --verify --no-verify --no-edit --no-gpg-sign --rerere-autoupdate --no-rerere-autoupdate"),
	list(o("-s|--strategy="), o("-X|--strategy-option="), o("-S|--gpg-sign?"), o("--cleanup="), o("-e|--edit").denyWith("opens an editor")))

// gitStash: `git stash` alone is `git stash push`; list and show read.
func gitStash(logOpts, diffOpts []*opt) *cmdSpec {
	push := opts(flags("-k|--keep-index --no-keep-index -u|--include-untracked -a|--all -q|--quiet --staged -S --pathspec-file-nul"),
		list(o("-m|--message="), o("--pathspec-from-file=", R0), o("-p|--patch").denyWith("is interactive").onTerminal()))
	w := func(name string, more ...*opt) *cmdSpec {
		return &cmdSpec{name: name, write: true, plainWrite: true, operand: KOther, opts: opts(flags("-q|--quiet"), more)}
	}
	return &cmdSpec{plainWrite: true, post: postGitStashPush, opts: push, subs: subs(
		&cmdSpec{name: "push", write: true, plainWrite: true, post: func(p *parsed) { gitPathspecs(p, 0) }, opts: push},
		&cmdSpec{name: "save", write: true, plainWrite: true, operand: KOther, opts: push},
		w("pop", o("--index")), w("apply", o("--index")), w("branch"), w("store", o("-m|--message=")), w("create"),
		&cmdSpec{name: "drop", write: true, operand: KOther, opts: flags("-q|--quiet")},
		&cmdSpec{name: "clear", write: true},
		&cmdSpec{name: "list", opts: logOpts},
		&cmdSpec{name: "show", operand: KOther, opts: opts(diffOpts, flags("--include-untracked --only-untracked"))},
	)}
}

// R0 is a path read (the kinds R and W are local to the register functions).
const R0 = KPathRead

func postGitStashPush(p *parsed) {
	p.write = true
	gitPathspecs(p, 0)
}

// postGitTag: a tag name (without a listing option) creates a tag.
func postGitTag(p *parsed) {
	if len(p.operands) > 0 && !p.has("-l", "-v", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "-n") || p.has("-d", "-a", "-s", "-f", "-m", "-F") {
		p.write = true
	}
}

// postGitClean: clean removes untracked files (a dry run only lists them).
func postGitClean(p *parsed) {
	gitPathspecs(p, 0)
	if !p.has("-n") {
		p.write = true
	}
}

// postGitApply: apply writes the files its patches name (not checked one
// by one); --stat, --numstat, --summary and --check only read, unless
// --apply is given too.
func postGitApply(p *parsed) {
	if p.has("--apply") || !p.has("--stat", "--numstat", "--summary", "--check") {
		p.write = true
	}
}

// gitRemote: listing remotes reads; add/remove/rename/set-url change the
// repository's config (not a plain edit; the sandbox keeps .git/config
// read-only); show, prune and update reach the remote.
func gitRemote() *cmdSpec {
	cfg := func(name string, more ...*opt) *cmdSpec {
		return &cmdSpec{name: name, write: true, operand: KOther, post: postGitRemoteURL, opts: opts(list(more...))}
	}
	return &cmdSpec{opts: flags("-v|--verbose"), subs: subs(
		cfg("add", o("-t="), o("-m="), o("-f"), o("--tags"), o("--no-tags"), o("--mirror?")),
		cfg("remove"), cfg("rm"), cfg("rename", o("--progress"), o("--no-progress")),
		cfg("set-url", o("--push"), o("--add"), o("--delete")),
		cfg("set-branches", o("--add")),
		&cmdSpec{name: "set-head", write: true, net: true, operand: KOther, opts: flags("-a|--auto -d|--delete")},
		&cmdSpec{name: "get-url", operand: KOther, opts: flags("--push --all")},
		&cmdSpec{name: "show", net: true, operand: KOther, post: func(p *parsed) {
			if p.has("-n") {
				p.net = false
			}
		}, opts: flags("-n")},
		&cmdSpec{name: "prune", net: true, write: true, operand: KOther, opts: flags("-n|--dry-run")},
		&cmdSpec{name: "update", net: true, write: true, operand: KOther, opts: flags("-p|--prune")},
	)}
}

// postGitRemoteURL: a URL given to remote add/set-url is checked as a
// remote (no transport helpers).
func postGitRemoteURL(p *parsed) {
	for _, op := range p.operands {
		if strings.Contains(op.value, ":") {
			checkGitURL(p, op.value)
		}
	}
}

// gitReflog: `git reflog` (show) reads; expire and delete rewrite it.
func gitReflog(logOpts []*opt) *cmdSpec {
	return &cmdSpec{operand: KOther, opts: logOpts, subs: subs(
		&cmdSpec{name: "show", operand: KOther, opts: logOpts},
		&cmdSpec{name: "exists", operand: KOther},
		&cmdSpec{name: "expire", write: true, operand: KOther, opts: opts(flags("--all --single-worktree --rewrite --updateref --stale-fix -n|--dry-run --verbose"), list(o("--expire="), o("--expire-unreachable=")))},
		&cmdSpec{name: "delete", write: true, operand: KOther, opts: flags("--rewrite --updateref -n|--dry-run --verbose")},
	)}
}

// gitWorktree: list reads; add writes a new work tree (its path checked);
// remove, prune, move, lock and unlock change the repository's worktrees.
func gitWorktree() *cmdSpec {
	W := KPathWrite
	return &cmdSpec{needSub: true, subs: subs(
		&cmdSpec{name: "list", opts: opts(flags("-v|--verbose --porcelain -z"), list(o("--expire=")))},
		&cmdSpec{name: "add", write: true, operand: KOther, hasFirst: true, first: W, opts: opts(flags("-f|--force --detach --checkout --no-checkout --lock -q|--quiet --track --no-track --guess-remote --no-guess-remote --orphan --relative-paths --no-relative-paths"), list(o("-b="), o("-B="), o("--reason=")))},
		&cmdSpec{name: "remove", write: true, operand: W, opts: flags("-f|--force")},
		&cmdSpec{name: "move", write: true, operand: W, opts: flags("-f|--force")},
		&cmdSpec{name: "prune", write: true, opts: opts(flags("-n|--dry-run -v|--verbose"), list(o("--expire=")))},
		&cmdSpec{name: "lock", write: true, operand: KOther, opts: list(o("--reason="))},
		&cmdSpec{name: "unlock", write: true, operand: KOther},
		&cmdSpec{name: "repair", write: true, operand: KOther},
	)}
}

// gitBisect: a bisection moves HEAD and the work tree through history
// (not a plain edit: it asks); `bisect run` runs the given command at each
// step.
func gitBisect() *cmdSpec {
	step := func(name string) *cmdSpec { return &cmdSpec{name: name, write: true, operand: KOther} }
	return &cmdSpec{needSub: true, subs: subs(
		&cmdSpec{name: "start", write: true, operand: KOther, opts: opts(flags("--no-checkout --first-parent"), list(o("--term-new|--term-bad="), o("--term-old|--term-good=")))},
		step("bad"), step("good"), step("new"), step("old"), step("skip"), step("reset"), step("replay"),
		&cmdSpec{name: "log"}, &cmdSpec{name: "terms", opts: flags("--term-good --term-bad --term-old --term-new")},
		&cmdSpec{name: "visualize", opts: logOpts0()}, &cmdSpec{name: "view", opts: logOpts0()},
		&cmdSpec{name: "run", write: true, posix: true, operand: KOther},
	)}
}

func logOpts0() []*opt { return flags("--stat --oneline -p") }

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
	if p.has("-d", "-D", "-m", "-M", "-C", "-f") {
		p.notPlain = append(p.notPlain, "git branch -d/-D/-m/-M/-C/-f deletes, renames or overwrites branches")
	}
	if p.has("-d", "-D", "-m", "-M", "-c", "-C", "-f", "-u", "--unset-upstream", "-t", "--no-track", "--create-reflog") {
		p.write = true
	}
	if len(p.operands) > 0 && !p.has("-l", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at") {
		p.write = true
	}
}

// postGitCheckout: git checkout can discard changes (checkout FILE, -f);
// only checkout -b NAME [START] creates a branch and switches to it as git
// switch -c does, which refuses to discard local changes.
func postGitCheckout(p *parsed) {
	if !p.has("-b") || p.has("-f", "-m", "-B", "--orphan", "--ours", "--theirs", "--pathspec-from-file") || len(p.operands) > 1 {
		p.notPlain = append(p.notPlain, "git checkout is not a plain edit (it can discard changes in the work tree; only checkout -b NAME [START] is)")
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

func hasComponent(p, name string) bool {
	for _, c := range strings.Split(p, "/") {
		if c == name {
			return true
		}
	}
	return false
}

// gitRepoReads are files of the repository git will use that it reads by
// fixed names and may echo in errors (a link to a root-only file), and the
// object directories an alternates file names (a root-only repository
// would be read through them).
func gitRepoReads(pc *parsed, cwd string, ctx *decideCtx) []string {
	dir := gitWorkDir(pc, cwd)
	var gitDir string
	if v := pc.values("--git-dir"); len(v) > 0 {
		gitDir = resolvePath(dir, v[len(v)-1])
	} else {
		for _, d := range dirsUpTo(dir, ctx) {
			if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
				gitDir = filepath.Join(d, ".git")
				break
			}
		}
	}
	if gitDir == "" {
		return nil
	}
	// A .git *file* ("gitdir: PATH") sends git to another repository: that
	// one is what is read.
	if fi, err := os.Stat(gitDir); err == nil && fi.Mode().IsRegular() {
		data, _ := readProjectFile(gitDir, 1<<16)
		line, _, _ := strings.Cut(string(data), "\n")
		target, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
		if !ok {
			return []string{gitDir}
		}
		gitDir = resolvePath(filepath.Dir(gitDir), strings.TrimSpace(target))
	}
	var out []string
	for _, name := range []string{"packed-refs", "HEAD", "commondir", "objects/info/alternates", "objects/info/http-alternates", "info/grafts", "shallow"} {
		f := filepath.Join(gitDir, name)
		if _, err := os.Lstat(f); err == nil {
			out = append(out, f)
		}
	}
	if data, err := readProjectFile(filepath.Join(gitDir, "objects/info/alternates"), 1<<16-1); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				out = append(out, resolvePath(filepath.Join(gitDir, "objects"), line))
			}
		}
	}
	return out
}

// gitConfigEnv turns the git program's mandatory "-c key=value" arguments
// into GIT_CONFIG_COUNT/KEY_n/VALUE_n, the environment form of -c (computed
// once when a policy is loaded).
func gitConfigEnv(args []string) map[string]string {
	env := map[string]string{}
	n := 0
	for i := 0; i+1 < len(args); i++ {
		if args[i] != "-c" {
			continue
		}
		k, v, ok := strings.Cut(args[i+1], "=")
		if !ok {
			continue
		}
		env[fmt.Sprintf("GIT_CONFIG_KEY_%d", n)] = k
		env[fmt.Sprintf("GIT_CONFIG_VALUE_%d", n)] = v
		n++
		i++
	}
	if n > 0 {
		env["GIT_CONFIG_COUNT"] = strconv.Itoa(n)
	}
	return env
}

// gitWorkDir is where git works after its own -C options (not a
// subcommand's -C, such as grep's context), applied in order.
func gitWorkDir(pc *parsed, cwd string) string { return toolNamed("git").workDir(pc, cwd) }

// gitFixedReads: the repository files git uses by fixed names.
func gitFixedReads(c *toolCall) []string { return gitRepoReads(c.pc, c.cwd, c.ctx) }

// gitDiffReads: git diff compares a directory and a file like diff does.
func gitDiffReads(c *toolCall) []string {
	if len(c.pc.subs) > 0 && c.pc.subs[0] == "diff" {
		return diffPairReads(c.pc, gitWorkDir(c.pc, c.cwd))
	}
	return nil
}

// checkGit: a git directory outside a ".git" component (a bare repository
// the caller built with cp/sed) has a config the caller could write: its
// textconv/filter/fsmonitor settings would run programs.
func checkGit(c *toolCall) {
	pc, cwd := c.pc, c.cwd
	if cwd == "" {
		return
	}
	for _, v := range pc.values("--work-tree") {
		// git reads (diff, status) and writes (checkout) every file of
		// the work tree, none of which is checked one by one.
		if real := resolvePath(gitWorkDir(pc, cwd), v); !inAnyWorkspace(real, c.ctx) {
			c.deny(RiskHigh, "git --work-tree="+clip(v)+": "+real+" is outside the workspace roots (its files would be read or written unchecked)")
		}
	}
	for _, v := range pc.values("--git-dir") {
		if real := resolvePath(gitWorkDir(pc, cwd), v); !hasComponent(real, ".git") {
			c.deny(RiskCritical, "git --git-dir="+clip(v)+": "+real+" is not inside a .git directory (its config could run programs)")
		}
	}
}

// forceGit: options and environment that depend on the git command (the
// ones every git command runs with are gitExecArgs and gitExecEnv).
func forceGit(c *toolCall) {
	if len(c.pc.subs) > 0 {
		switch c.pc.subs[0] {
		case "diff":
			// git diff is the one command that runs diff.external by
			// default (a repository's config could name a program): never.
			c.addOption("--no-ext-diff")
		case "config":
			// git config follows include.path by default when no file is
			// named: a repository's config could include a root-only file.
			c.addOption("--no-includes")
		case "push":
			// A push to a local repository runs that repository's
			// receive-pack and hooks with its own config (termd's -c
			// settings do not reach it): pushes go over the network
			// protocols only.
			c.setEnv("GIT_ALLOW_PROTOCOL", "git:http:https:ssh")
		}
	}
	// git looks for a repository in the parents of where it runs: stop it
	// at the workspace roots, so that a repository around a workspace (a
	// home directory kept in git) is never the one a command reads or
	// changes ("git checkout -- ../.bashrc").
	var ceil []string
	for _, ws := range c.ctx.workspaces {
		if ws != "/" {
			ceil = append(ceil, filepath.Dir(ws))
		}
	}
	if len(ceil) > 0 {
		c.setEnv("GIT_CEILING_DIRECTORIES", strings.Join(ceil, ":"))
	}
}
