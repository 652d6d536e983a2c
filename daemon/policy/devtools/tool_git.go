// Package devtools holds the specs of the developer tools that run project
// code or history: git, go, make, npm/pnpm/yarn, cargo, python/pytest/uv
// and the interpreters. Each file registers its family with
// toolspec.Family; it imports toolspec, grammar, verdict and unixtools
// (diff's pair reads, grep's pattern operand).
package devtools

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/unixtools"
	"github.com/termd/termd/daemon/policy/verdict"
)

var _ = toolspec.Family(registerGit)

// registerGit: git, its subcommands, and what it reads and is forced to
// run with (hooks, pagers, editors and external programs off).
func registerGit() {
	R, W := grammar.KPathRead, grammar.KPathWrite
	diffOpts := grammar.Opts(grammar.Flags("-p|-u|--patch -s|--no-patch --raw --numstat --shortstat --name-only --name-status --summary --no-color -w|--ignore-all-space -b|--ignore-space-change --ignore-blank-lines --ignore-space-at-eol --ignore-cr-at-eol -R --no-renames --binary --full-index --no-ext-diff --textconv --no-textconv --pickaxe-all --pickaxe-regex -z -a|--text --minimal --patience --histogram --check --exit-code --quiet --no-prefix --no-relative --cc --combined-all-paths --compact-summary --patch-with-stat --patch-with-raw -W|--function-context --ita-invisible-in-index --default-prefix"),
		grammar.List(grammar.O("-U|--unified?"), grammar.O("--stat?"), grammar.O("--dirstat?"), grammar.O("--color?"), grammar.O("--word-diff?"), grammar.O("--color-words?"), grammar.O("--color-moved?"), grammar.O("-M|--find-renames?"), grammar.O("-C|--find-copies?"), grammar.O("-B|--break-rewrites?"), grammar.O("-l?"), grammar.O("--abbrev?"), grammar.O("--diff-filter="), grammar.O("-S="), grammar.O("-G="), grammar.O("-O=", R), grammar.O("--relative?"), grammar.O("--diff-algorithm="), grammar.O("--src-prefix="), grammar.O("--dst-prefix="), grammar.O("--line-prefix="), grammar.O("--submodule?"), grammar.O("--ignore-submodules?"), grammar.O("--inter-hunk-context="), grammar.O("--output=", W), grammar.O("--find-object="), grammar.O("--anchored="), grammar.O("-I|--ignore-matching-lines="),
			grammar.O("--ext-diff").DenyWith("runs an external diff program")))
	logOpts := grammar.Opts(diffOpts, grammar.Flags("--oneline --abbrev-commit --no-abbrev-commit --graph --no-decorate --all --first-parent --merges --no-merges --reverse --follow --source --topo-order --date-order --author-date-order --left-right --cherry-pick --cherry-mark --cherry --boundary --ancestry-path --simplify-by-decoration --full-history --dense --sparse -g|--walk-reflogs --show-signature -m --mailmap --use-mailmap --no-mailmap --log-size --all-match --invert-grep -i|--regexp-ignore-case -E|--extended-regexp -F|--fixed-strings -P|--perl-regexp --basic-regexp --no-notes --stdin --not --children --parents --full-diff --remove-empty --no-min-parents --no-max-parents --expand-tabs --no-expand-tabs --clear-decorations --show-pulls --reflog --single-worktree --bisect --no-walk --do-walk --show-linear-break --exclude-first-parent-only --no-graph --show-notes-by-default -c -t --root --show-notes"),
		grammar.List(grammar.O("-n|--max-count="), grammar.O("--skip="), grammar.O("--since|--after|--since-as-filter="), grammar.O("--until|--before="), grammar.O("--author="), grammar.O("--committer="), grammar.O("--grep="), grammar.O("--grep-reflog="), grammar.O("--pretty?"), grammar.O("--format="), grammar.O("--decorate?"), grammar.O("--branches?"), grammar.O("--tags?"), grammar.O("--remotes?"), grammar.O("--glob="), grammar.O("--exclude="), grammar.O("--date="), grammar.O("-L="), grammar.O("--notes?"), grammar.O("--min-parents="), grammar.O("--max-parents="), grammar.O("--decorate-refs="), grammar.O("--decorate-refs-exclude="), grammar.O("--encoding=")))
	subcmds := grammar.Subs(
		grammar.Sub("status", &grammar.CmdSpec{Opts: grammar.Opts(grammar.Flags("-s|--short -b|--branch --long -v|--verbose -z --no-column --ahead-behind --no-ahead-behind --renames --no-renames --show-stash"), grammar.List(grammar.O("--porcelain?"), grammar.O("-u|--untracked-files?"), grammar.O("--ignored?"), grammar.O("--ignore-submodules?"), grammar.O("--column?"), grammar.O("--find-renames?")))}),
		grammar.Sub("log", &grammar.CmdSpec{NumFlag: "-n", Opts: logOpts}),
		grammar.Sub("show", &grammar.CmdSpec{NumFlag: "-n", Opts: logOpts}),
		grammar.Sub("diff", &grammar.CmdSpec{Post: postGitDiff, Opts: grammar.Opts(diffOpts, grammar.Flags("--cached|--staged --merge-base --no-index -0 -1 -2 -3 --base --ours --theirs"))}),
		grammar.Sub("branch", &grammar.CmdSpec{PlainWrite: true, Post: postGitBranch, Opts: grammar.Opts(grammar.Flags("-a|--all -r|--remotes -l|--list -v|--verbose --show-current -i|--ignore-case --no-color --no-abbrev --omit-empty -q|--quiet -d|--delete -D -m|--move -M -c|--copy -C -f|--force --unset-upstream --no-track --create-reflog --recurse-submodules"),
			grammar.List(grammar.O("--contains?"), grammar.O("--no-contains?"), grammar.O("--merged?"), grammar.O("--no-merged?"), grammar.O("--sort="), grammar.O("--format="), grammar.O("--points-at="), grammar.O("--color?"), grammar.O("--column?"), grammar.O("--no-column"), grammar.O("--abbrev?"), grammar.O("-u|--set-upstream-to="), grammar.O("-t|--track?"), grammar.O("--edit-description").DenyWith("opens an editor")))}),
		grammar.Sub("ls-files", &grammar.CmdSpec{Opts: grammar.Opts(grammar.Flags("-c|--cached -d|--deleted -m|--modified -o|--others -i|--ignored -s|--stage -u|--unmerged -k|--killed -z -t -v -f --directory --no-empty-directory --eol --full-name --recurse-submodules --debug --deduplicate --exclude-standard --error-unmatch --sparse --resolve-undo"), grammar.List(grammar.O("--abbrev?"), grammar.O("-x|--exclude="), grammar.O("-X|--exclude-from=", R), grammar.O("--exclude-per-directory="), grammar.O("--with-tree="), grammar.O("--format=")))}),
		grammar.Sub("rev-parse", &grammar.CmdSpec{Opts: grammar.Opts(grammar.Flags("--show-toplevel --show-prefix --show-cdup --git-dir --git-common-dir --absolute-git-dir --is-inside-work-tree --is-inside-git-dir --is-bare-repository --is-shallow-repository --verify -q|--quiet --symbolic --symbolic-full-name --all --local-env-vars --sq --sq-quote --revs-only --no-revs --flags --no-flags --show-superproject-working-tree --shared-index-path --not --keep-dashdash --stop-at-non-option --stuck-long"),
			grammar.List(grammar.O("--abbrev-ref?"), grammar.O("--short?"), grammar.O("--branches?"), grammar.O("--tags?"), grammar.O("--remotes?"), grammar.O("--glob="), grammar.O("--exclude="), grammar.O("--show-object-format?"), grammar.O("--path-format="), grammar.O("--git-path="), grammar.O("--default="), grammar.O("--prefix="), grammar.O("--since|--after="), grammar.O("--until|--before="), grammar.O("--resolve-git-dir=", R), grammar.O("--disambiguate="), grammar.O("--show-ref-format")))}),
		grammar.Sub("blame", &grammar.CmdSpec{Post: func(p *grammar.Parsed) { gitPathspecs(p, 0) }, Opts: grammar.Opts(grammar.Flags("-l -t -s -e|--show-email -w -p|--porcelain --line-porcelain --incremental -f|--show-name -n|--show-number -c --root --show-stats --first-parent --color-lines --color-by-age --progress --no-progress --score-debug -b"),
			grammar.List(grammar.O("-L="), grammar.O("-M?"), grammar.O("-C?"), grammar.O("--date="), grammar.O("--abbrev?"), grammar.O("--reverse="), grammar.O("--contents=", R), grammar.O("--since="), grammar.O("-S=", R), grammar.O("--ignore-rev="), grammar.O("--ignore-revs-file=", R), grammar.O("--encoding=")))}),
		grammar.Sub("grep", &grammar.CmdSpec{Post: postGitGrep, Opts: grammar.Opts(grammar.Flags("-i|--ignore-case -w|--word-regexp -v|--invert-match -n|--line-number -l|--files-with-matches|--name-only -L|--files-without-match -c|--count -h -H -o|--only-matching -q|--quiet -E|--extended-regexp -F|--fixed-strings -G|--basic-regexp -P|--perl-regexp --cached --untracked --no-index --index --recurse-submodules -r|--recursive --no-recursive -a|--text --full-name -z|--null --and --or --not --all-match -W|--function-context -p|--show-function --no-color --column --break --heading --textconv --no-textconv -I --exclude-standard --no-exclude-standard"),
			grammar.List(grammar.O("-e=", grammar.KPattern), grammar.O("-f=", R), grammar.O("-A|--after-context="), grammar.O("-B|--before-context="), grammar.O("-C|--context="), grammar.O("--max-depth="), grammar.O("--color?"), grammar.O("--threads="), grammar.O("-m|--max-count="), grammar.O("-O|--open-files-in-pager?").DenyWith(toolspec.WhyPager)))}),
		grammar.Sub("add", &grammar.CmdSpec{Write: true, PlainWrite: true, Interactive: true, Opts: grammar.Opts(grammar.Flags("-A|--all -u|--update -n|--dry-run -v|--verbose -f|--force -N|--intent-to-add --refresh --ignore-errors --ignore-missing --no-all --renormalize --pathspec-file-nul --sparse --no-ignore-removal --ignore-removal"), grammar.List(grammar.O("--chmod="), grammar.O("--pathspec-from-file=", R), grammar.O("-i|--interactive").DenyWith("is interactive").OnTerminal(), grammar.O("-p|--patch").DenyWith("is interactive").OnTerminal(), grammar.O("-e|--edit").DenyWith("opens an editor")))}),
		grammar.Sub("commit", &grammar.CmdSpec{Write: true, PlainWrite: true, Opts: grammar.Opts(grammar.Flags("-a|--all --no-edit -s|--signoff --no-signoff --allow-empty --allow-empty-message -n|--no-verify --verify -q|--quiet -v|--verbose --dry-run --no-status --status --no-gpg-sign -o|--only -i|--include --reset-author --pathspec-file-nul --short --porcelain --long -z|--null"),
			grammar.List(grammar.O("--amend").NotPlainWrite("rewrites the last commit (history)"), grammar.O("-m|--message="), grammar.O("-F|--file=", R), grammar.O("--author="), grammar.O("--date="), grammar.O("--fixup="), grammar.O("--squash="), grammar.O("-C|--reuse-message="), grammar.O("--cleanup="), grammar.O("--trailer="), grammar.O("--pathspec-from-file=", R), grammar.O("-u|--untracked-files?"), grammar.O("-S|--gpg-sign?"),
				grammar.O("-c|--reedit-message=").DenyWith("opens an editor"), grammar.O("-e|--edit").DenyWith("opens an editor"), grammar.O("-t|--template=").DenyWith("opens an editor"), grammar.O("-p|--patch").DenyWith("is interactive")))}),
		grammar.Sub("restore", &grammar.CmdSpec{Write: true, Opts: grammar.Opts(grammar.Flags("-S|--staged -W|--worktree --ours --theirs -m|--merge --ignore-unmerged --ignore-skip-worktree-bits --overlay --no-overlay -q|--quiet --progress --no-progress --recurse-submodules --no-recurse-submodules --pathspec-file-nul"), grammar.List(grammar.O("-s|--source="), grammar.O("--conflict="), grammar.O("--pathspec-from-file=", R), grammar.O("-p|--patch").DenyWith("is interactive")))}),
		// git switch refuses to discard local changes unless told to.
		grammar.Sub("switch", &grammar.CmdSpec{Write: true, PlainWrite: true, Opts: grammar.Opts(grammar.Flags("-d|--detach --guess --no-guess -q|--quiet --no-track --recurse-submodules --no-recurse-submodules --ignore-other-worktrees --progress --no-progress"),
			grammar.List(grammar.O("-f|--force|--discard-changes").NotPlainWrite(whyDiscards), grammar.O("-m|--merge").NotPlainWrite("merges local changes into the other branch's files (conflicts rewrite them)"), grammar.O("-c|--create="), grammar.O("-C|--force-create=").NotPlainWrite("resets an existing branch"), grammar.O("--conflict="), grammar.O("--orphan=").NotPlainWrite("empties the work tree of tracked files"), grammar.O("-t|--track?")))}),
		grammar.Sub("checkout", &grammar.CmdSpec{Write: true, PlainWrite: true, Post: postGitCheckout, Opts: grammar.Opts(grammar.Flags("-f|--force -q|--quiet --detach --no-track -m|--merge --ours --theirs --recurse-submodules --no-recurse-submodules --overlay --no-overlay --pathspec-file-nul -l --ignore-other-worktrees --progress --no-progress --guess --no-guess --ignore-skip-worktree-bits"), grammar.List(grammar.O("-b="), grammar.O("-B="), grammar.O("-t|--track?"), grammar.O("--orphan="), grammar.O("--conflict="), grammar.O("--pathspec-from-file=", R), grammar.O("-p|--patch").DenyWith("is interactive")))}),
		grammar.Sub("fetch", &grammar.CmdSpec{Net: true, Write: true, Operand: grammar.KURL, Post: postGitURL, Opts: grammar.Opts(grammar.Flags("--all -p|--prune -P|--prune-tags -t|--tags -n|--no-tags --unshallow -q|--quiet -v|--verbose -f|--force --dry-run --no-recurse-submodules --multiple --atomic --refetch --set-upstream --progress -u|--update-head-ok -4|--ipv4 -6|--ipv6 -k|--keep -a|--append --porcelain --no-write-fetch-head --write-fetch-head --no-show-forced-updates --show-forced-updates --update-shallow --no-auto-gc --auto-gc --no-auto-maintenance --auto-maintenance"),
			grammar.List(grammar.O("--depth="), grammar.O("--deepen="), grammar.O("--shallow-since="), grammar.O("--shallow-exclude="), grammar.O("--recurse-submodules?").DenyWith("fetches submodules from URLs the repository names (not checked)"), grammar.O("-j|--jobs="), grammar.O("--filter="), grammar.O("--negotiation-tip="), grammar.O("-o|--server-option="), grammar.O("--refmap="), grammar.O("--upload-pack=").DenyWith("runs a program on the remote side chosen by the caller")))}),
		grammar.Sub("ls-remote", &grammar.CmdSpec{Net: true, Operand: grammar.KURL, Post: postGitURL, Opts: grammar.Opts(grammar.Flags("--heads --tags -t -b|--branches --refs -q|--quiet --exit-code --get-url --symref"),
			grammar.List(grammar.O("--sort="), grammar.O("-o|--server-option="), grammar.O("--upload-pack=").DenyWith("runs a program on the remote side chosen by the caller")))}),
		grammar.Sub("pull", &grammar.CmdSpec{Net: true, Write: true, Operand: grammar.KURL, Post: postGitURL, Opts: grammar.Opts(grammar.Flags("--no-rebase --ff --no-ff --ff-only -q|--quiet -v|--verbose --autostash --no-autostash --all --tags --no-tags -p|--prune --squash --no-squash --commit --no-commit --no-edit --verify --no-verify --stat -n|--no-stat --signoff --no-signoff --progress -4|--ipv4 -6|--ipv6 --allow-unrelated-histories --unshallow --no-gpg-sign"),
			grammar.List(grammar.O("-r|--rebase?"), grammar.O("--depth="), grammar.O("-s|--strategy="), grammar.O("-X|--strategy-option="), grammar.O("--recurse-submodules?").DenyWith("fetches submodules from URLs the repository names (not checked)"), grammar.O("-j|--jobs="), grammar.O("-S|--gpg-sign?"), grammar.O("-e|--edit").DenyWith("opens an editor"), grammar.O("--upload-pack=").DenyWith("runs a program on the remote side chosen by the caller")))}),
		grammar.Sub("push", &grammar.CmdSpec{Net: true, Operand: grammar.KURL, Post: postGitURL, Opts: grammar.Opts(grammar.Flags("-u|--set-upstream -f|--force --force-if-includes --all --branches --tags --follow-tags --no-follow-tags -d|--delete -n|--dry-run --porcelain -q|--quiet -v|--verbose --prune --mirror --atomic --no-atomic --no-verify --verify --progress --no-progress -4|--ipv4 -6|--ipv6 --no-signed --no-force-with-lease"),
			grammar.List(grammar.O("--force-with-lease?"), grammar.O("-o|--push-option="), grammar.O("--recurse-submodules="), grammar.O("--signed?"), grammar.O("--repo="), grammar.O("--receive-pack=").DenyWith("runs a program on the remote side chosen by the caller"), grammar.O("--exec=").DenyWith("runs a program on the remote side chosen by the caller")))}),
		grammar.Sub("clone", &grammar.CmdSpec{Net: true, Write: true, Operand: grammar.KURL, HasLast: true, Last: W, Post: postGitClone, Opts: grammar.Opts(grammar.Flags("--single-branch --no-single-branch --shallow-submodules --no-shallow-submodules -q|--quiet -v|--verbose --progress -n|--no-checkout --sparse --no-tags --tags --dissociate -l|--local --no-local --no-hardlinks -s|--shared --remote-submodules --no-remote-submodules --also-filter-submodules --reject-shallow --no-reject-shallow -4|--ipv4 -6|--ipv6"),
			grammar.List(grammar.O("--depth="), grammar.O("-b|--branch="), grammar.O("--recurse-submodules|--recursive?"), grammar.O("-o|--origin="), grammar.O("--filter="), grammar.O("--reference=", R), grammar.O("--reference-if-able=", R), grammar.O("--separate-git-dir=", W).DenyWith(whyGitDir), grammar.O("--bare").DenyWith(whyGitDir), grammar.O("--mirror").DenyWith(whyGitDir), grammar.O("-j|--jobs="), grammar.O("--shallow-since="), grammar.O("--shallow-exclude="), grammar.O("--bundle-uri="), grammar.O("--server-option="), grammar.O("--revision="), grammar.O("--ref-format="),
				grammar.O("--template=").DenyWith("installs hooks from a template directory"), grammar.O("-c|--config=").DenyWith(toolspec.WhyConfig), grammar.O("-u|--upload-pack=").DenyWith("runs a program chosen by the caller")))}),
		grammar.Sub("stash", gitStash(logOpts, diffOpts)),
		grammar.Sub("reset", &grammar.CmdSpec{Write: true, PlainWrite: true, Post: func(p *grammar.Parsed) { gitPathspecs(p, 0) }, Opts: grammar.Opts(grammar.Flags("--soft --mixed -q|--quiet --no-refresh --refresh -N|--intent-to-add --recurse-submodules --no-recurse-submodules --pathspec-file-nul"),
			grammar.List(grammar.O("--hard").NotPlainWrite(whyDiscards), grammar.O("--merge").NotPlainWrite(whyDiscards), grammar.O("--keep").NotPlainWrite(whyDiscards), grammar.O("--pathspec-from-file=", R), grammar.O("-p|--patch").DenyWith("is interactive").OnTerminal()))}),
		grammar.Sub("merge", &grammar.CmdSpec{Write: true, PlainWrite: true, Operand: grammar.KOther, Opts: grammar.Opts(mergeOpts, grammar.Flags("--commit --no-commit --ff --squash --no-squash --stat -n|--no-stat --summary --log --no-log --verify-signatures --no-verify-signatures --allow-unrelated-histories --continue --quit --overwrite-ignore --no-overwrite-ignore"),
			grammar.List(grammar.O("-m|--message="), grammar.O("-F|--file=", R), grammar.O("--into-name="), grammar.O("--abort").NotPlainWrite("abandons the merge and the changes made for it")))}),
		grammar.Sub("rebase", &grammar.CmdSpec{Write: true, Operand: grammar.KOther, Opts: grammar.Opts(mergeOpts, grammar.Flags("--continue --skip --quit --abort --keep-base --root --autosquash --no-autosquash --committer-date-is-author-date --ignore-date --reset-author-date --update-refs --no-update-refs --fork-point --no-fork-point --force-rebase -f --keep-empty --no-keep-empty --apply -m|--merge -i|--interactive --reschedule-failed-exec --no-reschedule-failed-exec --show-current-patch --ignore-whitespace --stat -n|--no-stat --edit-todo --no-rebase-merges"),
			grammar.List(grammar.O("--onto="), grammar.O("--empty="), grammar.O("-r|--rebase-merges?"), grammar.O("--whitespace="), grammar.O("-C="), grammar.O("-x|--exec=").DenyWith("runs a shell command string after each commit (send the commands as argv instead)")))}),
		grammar.Sub("cherry-pick", &grammar.CmdSpec{Write: true, PlainWrite: true, Operand: grammar.KOther, Opts: grammar.Opts(mergeOpts, grammar.Flags("--continue --skip --quit -x -r --allow-empty --allow-empty-message --keep-redundant-commits"),
			grammar.List(grammar.O("-n|--no-commit"), grammar.O("--ff"), grammar.O("-m|--mainline="), grammar.O("--empty="), grammar.O("--abort").NotPlainWrite("abandons the cherry-pick and the changes made for it")))}),
		grammar.Sub("revert", &grammar.CmdSpec{Write: true, PlainWrite: true, Operand: grammar.KOther, Opts: grammar.Opts(grammar.Flags("--continue --skip --quit -n|--no-commit -s|--signoff --no-signoff --no-edit --no-gpg-sign --rerere-autoupdate --no-rerere-autoupdate --reference"),
			grammar.List(grammar.O("-m|--mainline="), grammar.O("--cleanup="), grammar.O("--strategy="), grammar.O("-X|--strategy-option="), grammar.O("-S|--gpg-sign?"), grammar.O("-e|--edit").DenyWith("opens an editor"), grammar.O("--abort").NotPlainWrite("abandons the revert and the changes made for it")))}),
		grammar.Sub("tag", &grammar.CmdSpec{PlainWrite: true, Operand: grammar.KOther, Post: postGitTag, Opts: grammar.Opts(grammar.Flags("-a|--annotate -s|--sign --no-sign -f|--force -v|--verify -l|--list -i|--ignore-case --omit-empty --create-reflog --no-column"),
			grammar.List(grammar.O("-n?"), grammar.O("-u|--local-user="), grammar.O("-m|--message="), grammar.O("-F|--file=", R), grammar.O("--cleanup="), grammar.O("--sort="), grammar.O("--contains?"), grammar.O("--no-contains?"), grammar.O("--merged?"), grammar.O("--no-merged?"), grammar.O("--points-at="), grammar.O("--format="), grammar.O("--color?"), grammar.O("--column?"), grammar.O("--trailer="),
				grammar.O("-d|--delete").NotPlainWrite("deletes tags"), grammar.O("-e|--edit").DenyWith("opens an editor")))}),
		grammar.Sub("clean", &grammar.CmdSpec{Post: postGitClean, Opts: grammar.Opts(grammar.Flags("-d -f|--force -n|--dry-run -q|--quiet -x -X"), grammar.List(grammar.O("-e|--exclude="), grammar.O("-i|--interactive").DenyWith("is interactive").OnTerminal()))}),
		grammar.Sub("apply", &grammar.CmdSpec{Operand: R, Post: postGitApply, Opts: grammar.Opts(grammar.Flags("--stat --numstat --summary --check --index --cached --intent-to-add -3|--3way --ours --theirs --union -R|--reverse --reject -z --unidiff-zero --apply --no-add --allow-binary-replacement --binary --recount --inaccurate-eof -v|--verbose -q|--quiet --allow-empty --ignore-space-change --ignore-whitespace --allow-overlap"),
			grammar.List(grammar.O("-p="), grammar.O("-C="), grammar.O("--exclude="), grammar.O("--include="), grammar.O("--whitespace="), grammar.O("--directory="), grammar.O("--build-fake-ancestor=", W)))}),
		grammar.Sub("remote", gitRemote()),
		grammar.Sub("describe", &grammar.CmdSpec{Operand: grammar.KOther, Opts: grammar.Opts(grammar.Flags("--all --tags --long --always --first-parent --exact-match --debug --contains"), grammar.List(grammar.O("--abbrev?"), grammar.O("--candidates="), grammar.O("--match="), grammar.O("--exclude="), grammar.O("--dirty?"), grammar.O("--broken?")))}),
		grammar.Sub("shortlog", &grammar.CmdSpec{Opts: grammar.Opts(grammar.Flags("-n|--numbered -s|--summary -e|--email -c|--committer --all --no-merges --merges --first-parent --reverse --mailmap --no-mailmap"), grammar.List(grammar.O("--since|--after="), grammar.O("--until|--before="), grammar.O("--author="), grammar.O("--group="), grammar.O("--format="), grammar.O("-w?")))}),
		grammar.Sub("reflog", gitReflog(logOpts)),
		grammar.Sub("worktree", gitWorktree()),
		grammar.Sub("bisect", gitBisect()),
		grammar.Sub("config", &grammar.CmdSpec{Post: postGitConfig, Opts: grammar.Opts(grammar.Flags("-l|--list --get --get-all --get-regexp --get-urlmatch --show-origin --show-scope --name-only -z|--null --global --system --local --worktree --bool --int --bool-or-int --path --expiry-date --no-includes --no-type"), grammar.List(grammar.O("--includes").DenyWith("follows include.path to files the config names (not checked)"), grammar.O("-f|--file=", R), grammar.O("--blob="), grammar.O("--type="), grammar.O("--default="), grammar.O("-e|--edit").DenyWith("opens an editor")))}),
	)
	toolspec.Register("git", &toolspec.ToolSpec{Chdir: "-C", FixedReads: gitFixedReads, DerivedReads: gitDiffReads, Check: checkGit, ChildEnv: gitConfigEnv, Forced: forceGit,
		ExecArgs: gitExecArgs, ExecEnv: gitExecEnv, SandboxExec: []string{"/usr/lib/git-core"}, // git runs its own helpers (a read-only sandbox executes nothing else)
		Grammar: &grammar.CmdSpec{NeedSub: true, Subs: subcmds, Opts: grammar.Opts(grammar.Flags("-P|--no-pager --no-replace-objects --literal-pathspecs --glob-pathspecs --noglob-pathspecs --icase-pathspecs --no-optional-locks --version --html-path --man-path --info-path --no-advice"),
			grammar.List(grammar.O("-C=", R).MovesDir(), grammar.O("--git-dir=", R).MovesDir(), grammar.O("--work-tree=", R).MovesDir(), grammar.O("--namespace="), grammar.O("--list-cmds="), grammar.O("--attr-source="),
				grammar.O("--bare").DenyWith("uses the directory as a bare repository, whose config the caller could have written (a config runs programs)"),
				grammar.O("-c=").DenyWith(toolspec.WhyConfig), grammar.O("--config-env=").DenyWith(toolspec.WhyConfig), grammar.O("--exec-path?").DenyWith("changes where git finds the programs it runs"), grammar.O("-p|--paginate").DenyWith(toolspec.WhyPager), grammar.O("--super-prefix=").DenyWith("is an internal option"), grammar.O("--help")))}})
	var addHelp func(m map[string]*grammar.CmdSpec)
	addHelp = func(m map[string]*grammar.CmdSpec) {
		for _, s := range m {
			s.Index()
			if _, ok := s.OptIndex["-h"]; !ok {
				s.Opts = append(s.Opts, grammar.O("-h"))
			}
			if _, ok := s.OptIndex["--help"]; !ok {
				s.Opts = append(s.Opts, grammar.O("--help"))
			}
			addHelp(s.Subs)
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
var mergeOpts = grammar.Opts(grammar.Flags("--no-ff --ff-only -q|--quiet -v|--verbose --progress --no-progress --autostash --no-autostash --signoff --no-signoff --verify --no-verify --no-edit --no-gpg-sign --rerere-autoupdate --no-rerere-autoupdate"),
	grammar.List(grammar.O("-s|--strategy="), grammar.O("-X|--strategy-option="), grammar.O("-S|--gpg-sign?"), grammar.O("--cleanup="), grammar.O("-e|--edit").DenyWith("opens an editor")))

// gitStash: `git stash` alone is `git stash push`; list and show read.
func gitStash(logOpts, diffOpts []*grammar.Opt) *grammar.CmdSpec {
	push := grammar.Opts(grammar.Flags("-k|--keep-index --no-keep-index -u|--include-untracked -a|--all -q|--quiet --staged -S --pathspec-file-nul"),
		grammar.List(grammar.O("-m|--message="), grammar.O("--pathspec-from-file=", R0), grammar.O("-p|--patch").DenyWith("is interactive").OnTerminal()))
	w := func(name string, more ...*grammar.Opt) *grammar.CmdSpec {
		return &grammar.CmdSpec{Name: name, Write: true, PlainWrite: true, Operand: grammar.KOther, Opts: grammar.Opts(grammar.Flags("-q|--quiet"), more)}
	}
	return &grammar.CmdSpec{PlainWrite: true, Post: postGitStashPush, Opts: push, Subs: grammar.Subs(
		&grammar.CmdSpec{Name: "push", Write: true, PlainWrite: true, Post: func(p *grammar.Parsed) { gitPathspecs(p, 0) }, Opts: push},
		&grammar.CmdSpec{Name: "save", Write: true, PlainWrite: true, Operand: grammar.KOther, Opts: push},
		w("pop", grammar.O("--index")), w("apply", grammar.O("--index")), w("branch"), w("store", grammar.O("-m|--message=")), w("create"),
		&grammar.CmdSpec{Name: "drop", Write: true, Operand: grammar.KOther, Opts: grammar.Flags("-q|--quiet")},
		&grammar.CmdSpec{Name: "clear", Write: true},
		&grammar.CmdSpec{Name: "list", Opts: logOpts},
		&grammar.CmdSpec{Name: "show", Operand: grammar.KOther, Opts: grammar.Opts(diffOpts, grammar.Flags("--include-untracked --only-untracked"))},
	)}
}

// R0 is a path read (the kinds R and W are local to the register functions).
const R0 = grammar.KPathRead

func postGitStashPush(p *grammar.Parsed) {
	p.Write = true
	gitPathspecs(p, 0)
}

// postGitTag: a tag name (without a listing option) creates a tag.
func postGitTag(p *grammar.Parsed) {
	if len(p.Operands) > 0 && !p.Has("-l", "-v", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "-n") || p.Has("-d", "-a", "-s", "-f", "-m", "-F") {
		p.Write = true
	}
}

// postGitClean: clean removes untracked files (a dry run only lists them).
func postGitClean(p *grammar.Parsed) {
	gitPathspecs(p, 0)
	if !p.Has("-n") {
		p.Write = true
	}
}

// postGitApply: apply writes the files its patches name (not checked one
// by one); --stat, --numstat, --summary and --check only read, unless
// --apply is given too.
func postGitApply(p *grammar.Parsed) {
	if p.Has("--apply") || !p.Has("--stat", "--numstat", "--summary", "--check") {
		p.Write = true
	}
}

// gitRemote: listing remotes reads; add/remove/rename/set-url change the
// repository's config (not a plain edit; the sandbox keeps .git/config
// read-only); show, prune and update reach the remote.
func gitRemote() *grammar.CmdSpec {
	cfg := func(name string, more ...*grammar.Opt) *grammar.CmdSpec {
		return &grammar.CmdSpec{Name: name, Write: true, Operand: grammar.KOther, Post: postGitRemoteURL, Opts: grammar.Opts(grammar.List(more...))}
	}
	return &grammar.CmdSpec{Opts: grammar.Flags("-v|--verbose"), Subs: grammar.Subs(
		cfg("add", grammar.O("-t="), grammar.O("-m="), grammar.O("-f"), grammar.O("--tags"), grammar.O("--no-tags"), grammar.O("--mirror?")),
		cfg("remove"), cfg("rm"), cfg("rename", grammar.O("--progress"), grammar.O("--no-progress")),
		cfg("set-url", grammar.O("--push"), grammar.O("--add"), grammar.O("--delete")),
		cfg("set-branches", grammar.O("--add")),
		&grammar.CmdSpec{Name: "set-head", Write: true, Net: true, Operand: grammar.KOther, Opts: grammar.Flags("-a|--auto -d|--delete")},
		&grammar.CmdSpec{Name: "get-url", Operand: grammar.KOther, Opts: grammar.Flags("--push --all")},
		&grammar.CmdSpec{Name: "show", Net: true, Operand: grammar.KOther, Post: func(p *grammar.Parsed) {
			if p.Has("-n") {
				p.Net = false
			}
		}, Opts: grammar.Flags("-n")},
		&grammar.CmdSpec{Name: "prune", Net: true, Write: true, Operand: grammar.KOther, Opts: grammar.Flags("-n|--dry-run")},
		&grammar.CmdSpec{Name: "update", Net: true, Write: true, Operand: grammar.KOther, Opts: grammar.Flags("-p|--prune")},
	)}
}

// postGitRemoteURL: a URL given to remote add/set-url is checked as a
// remote (no transport helpers).
func postGitRemoteURL(p *grammar.Parsed) {
	for _, op := range p.Operands {
		if strings.Contains(op.Value, ":") {
			checkGitURL(p, op.Value)
		}
	}
}

// gitReflog: `git reflog` (show) reads; expire and delete rewrite it.
func gitReflog(logOpts []*grammar.Opt) *grammar.CmdSpec {
	return &grammar.CmdSpec{Operand: grammar.KOther, Opts: logOpts, Subs: grammar.Subs(
		&grammar.CmdSpec{Name: "show", Operand: grammar.KOther, Opts: logOpts},
		&grammar.CmdSpec{Name: "exists", Operand: grammar.KOther},
		&grammar.CmdSpec{Name: "expire", Write: true, Operand: grammar.KOther, Opts: grammar.Opts(grammar.Flags("--all --single-worktree --rewrite --updateref --stale-fix -n|--dry-run --verbose"), grammar.List(grammar.O("--expire="), grammar.O("--expire-unreachable=")))},
		&grammar.CmdSpec{Name: "delete", Write: true, Operand: grammar.KOther, Opts: grammar.Flags("--rewrite --updateref -n|--dry-run --verbose")},
	)}
}

// gitWorktree: list reads; add writes a new work tree (its path checked);
// remove, prune, move, lock and unlock change the repository's worktrees.
func gitWorktree() *grammar.CmdSpec {
	W := grammar.KPathWrite
	return &grammar.CmdSpec{NeedSub: true, Subs: grammar.Subs(
		&grammar.CmdSpec{Name: "list", Opts: grammar.Opts(grammar.Flags("-v|--verbose --porcelain -z"), grammar.List(grammar.O("--expire=")))},
		&grammar.CmdSpec{Name: "add", Write: true, Operand: grammar.KOther, HasFirst: true, First: W, Opts: grammar.Opts(grammar.Flags("-f|--force --detach --checkout --no-checkout --lock -q|--quiet --track --no-track --guess-remote --no-guess-remote --orphan --relative-paths --no-relative-paths"), grammar.List(grammar.O("-b="), grammar.O("-B="), grammar.O("--reason=")))},
		&grammar.CmdSpec{Name: "remove", Write: true, Operand: W, Opts: grammar.Flags("-f|--force")},
		&grammar.CmdSpec{Name: "move", Write: true, Operand: W, Opts: grammar.Flags("-f|--force")},
		&grammar.CmdSpec{Name: "prune", Write: true, Opts: grammar.Opts(grammar.Flags("-n|--dry-run -v|--verbose"), grammar.List(grammar.O("--expire=")))},
		&grammar.CmdSpec{Name: "lock", Write: true, Operand: grammar.KOther, Opts: grammar.List(grammar.O("--reason="))},
		&grammar.CmdSpec{Name: "unlock", Write: true, Operand: grammar.KOther},
		&grammar.CmdSpec{Name: "repair", Write: true, Operand: grammar.KOther},
	)}
}

// gitBisect: a bisection moves HEAD and the work tree through history
// (not a plain edit: it asks); `bisect run` runs the given command at each
// step.
func gitBisect() *grammar.CmdSpec {
	step := func(name string) *grammar.CmdSpec {
		return &grammar.CmdSpec{Name: name, Write: true, Operand: grammar.KOther}
	}
	return &grammar.CmdSpec{NeedSub: true, Subs: grammar.Subs(
		&grammar.CmdSpec{Name: "start", Write: true, Operand: grammar.KOther, Opts: grammar.Opts(grammar.Flags("--no-checkout --first-parent"), grammar.List(grammar.O("--term-new|--term-bad="), grammar.O("--term-old|--term-good=")))},
		step("bad"), step("good"), step("new"), step("old"), step("skip"), step("reset"), step("replay"),
		&grammar.CmdSpec{Name: "log"}, &grammar.CmdSpec{Name: "terms", Opts: grammar.Flags("--term-good --term-bad --term-old --term-new")},
		&grammar.CmdSpec{Name: "visualize", Opts: logOpts0()}, &grammar.CmdSpec{Name: "view", Opts: logOpts0()},
		&grammar.CmdSpec{Name: "run", Write: true, Posix: true, Operand: grammar.KOther},
	)}
}

func logOpts0() []*grammar.Opt { return grammar.Flags("--stat --oneline -p") }

const whyGitDir = "creates a repository whose config is not in a .git directory (a writable config runs programs)"

// gitPathspecs checks git's file arguments from operand i on as reads
// (revisions name no file and pass); pathspec magic (":(top)x", ":/x",
// ":!x") is refused, since it names files the check cannot resolve.
func gitPathspecs(p *grammar.Parsed, from int) {
	for i := from; i < len(p.Operands); i++ {
		v := p.Operands[i].Value
		if len(v) > 1 && v[0] == ':' && strings.IndexByte("(/!^", v[1]) >= 0 {
			p.Deny(verdict.RiskHigh, "%s %s: pathspec magic is not checked; name the files plainly", p.CmdName(), grammar.Clip(v))
			continue
		}
		p.Operands[i].Kind = grammar.KPathRead
	}
}

func postGitGrep(p *grammar.Parsed) {
	unixtools.PostPatternFirst("-e", "-f")(p)
	from := 0
	if len(p.Operands) > 0 && p.Operands[0].Kind == grammar.KPattern {
		from = 1
	}
	gitPathspecs(p, from)
}

// postGitDiff: every operand is checked as a read. Besides --no-index, git
// compares two files outside its work tree on its own ("git diff /etc/shadow
// /dev/null" prints the file); revisions are names that resolve to nothing.
func postGitDiff(p *grammar.Parsed) {
	gitPathspecs(p, 0)
}

func postGitBranch(p *grammar.Parsed) {
	if p.Has("-d", "-D", "-m", "-M", "-C", "-f") {
		p.NotPlain = append(p.NotPlain, "git branch -d/-D/-m/-M/-C/-f deletes, renames or overwrites branches")
	}
	if p.Has("-d", "-D", "-m", "-M", "-c", "-C", "-f", "-u", "--unset-upstream", "-t", "--no-track", "--create-reflog") {
		p.Write = true
	}
	if len(p.Operands) > 0 && !p.Has("-l", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at") {
		p.Write = true
	}
}

// postGitCheckout: git checkout can discard changes (checkout FILE, -f);
// only checkout -b NAME [START] creates a branch and switches to it as git
// switch -c does, which refuses to discard local changes.
func postGitCheckout(p *grammar.Parsed) {
	if !p.Has("-b") || p.Has("-f", "-m", "-B", "--orphan", "--ours", "--theirs", "--pathspec-from-file") || len(p.Operands) > 1 {
		p.NotPlain = append(p.NotPlain, "git checkout is not a plain edit (it can discard changes in the work tree; only checkout -b NAME [START] is)")
	}
}

func postGitConfig(p *grammar.Parsed) {
	if p.Has("-l", "--get", "--get-all", "--get-regexp", "--get-urlmatch") {
		return
	}
	switch {
	case len(p.Operands) == 0:
		return
	case p.Operands[0].Value == "get" || p.Operands[0].Value == "list":
		return
	case len(p.Operands) == 1 && strings.Contains(p.Operands[0].Value, ".") && !strings.HasPrefix(p.Operands[0].Value, "-"):
		return // `git config name` prints the value
	}
	p.Deny(verdict.RiskHigh, "git config: writing configuration (git config can run programs: core.fsmonitor, aliases, hooks)")
}

func checkGitURL(p *grammar.Parsed, v string) {
	l := strings.ToLower(v)
	if strings.HasPrefix(l, "ext::") || strings.HasPrefix(l, "fd::") || strings.Contains(l, "::") && !strings.Contains(l, "://") {
		p.Deny(verdict.RiskCritical, "%s: remote %q uses a transport helper that runs commands", p.CmdName(), grammar.Clip(v))
	}
	if strings.HasPrefix(v, "-") {
		p.Deny(verdict.RiskCritical, "%s: remote %q looks like an option", p.CmdName(), grammar.Clip(v))
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

func postGitURL(p *grammar.Parsed) {
	for i := range p.Operands {
		p.Operands[i].Kind = grammar.KOther // remote names and refspecs
		if i == 0 {
			checkGitURL(p, p.Operands[i].Value)
			if lp := gitLocalPath(p.Operands[i].Value, true); lp != "" {
				// fetching from a local repository reads it
				p.Paths = append(p.Paths, grammar.Operand{Value: lp, Kind: grammar.KPathRead})
			}
		}
	}
}

func postGitClone(p *grammar.Parsed) {
	if len(p.Operands) == 0 {
		p.Deny(verdict.RiskLow, "git clone: missing repository")
		return
	}
	checkGitURL(p, p.Operands[0].Value)
	p.Operands[0].Kind = grammar.KURL
	if lp := gitLocalPath(p.Operands[0].Value, false); lp != "" {
		p.Paths = append(p.Paths, grammar.Operand{Value: lp, Kind: grammar.KPathRead})
	}
	for _, b := range p.Values("--bundle-uri") {
		if lp := gitLocalPath(b, false); lp != "" {
			p.Paths = append(p.Paths, grammar.Operand{Value: lp, Kind: grammar.KPathRead})
		} else if l := strings.ToLower(b); !strings.HasPrefix(l, "https://") && !strings.HasPrefix(l, "http://") {
			p.Deny(verdict.RiskHigh, "git clone --bundle-uri=%s: only http(s) URLs and local files are accepted", grammar.Clip(b))
		}
	}
	if p.Has("--recurse-submodules") {
		p.Deny(verdict.RiskHigh, "git clone --recurse-submodules: the submodules' URLs come from the repository (a local path reads any repository) and are not checked; clone, then look at .gitmodules")
	}
	if len(p.Operands) == 1 {
		// clones into ./<name>, named as git does: without a trailing
		// "/.git", "/" or ".git", and (newer git) without surrounding blanks.
		// Both spellings are checked; a source whose name cannot be told is
		// refused rather than guessed.
		for _, src := range []string{p.Operands[0].Value, strings.TrimSpace(p.Operands[0].Value)} {
			name := gitCloneName(src)
			if name == "" || name == "." || name == ".." {
				p.Deny(verdict.RiskHigh, "git clone %s: the directory git would clone into cannot be told from this source; name the destination directory", grammar.Clip(p.Operands[0].Value))
				return
			}
			p.Operands = append(p.Operands, grammar.Operand{Value: name, Kind: grammar.KPathWrite})
		}
	}
}

// gitCloneName is the directory "git clone SRC" creates.
func gitCloneName(src string) string {
	s := strings.TrimRight(src, "/")
	for strings.HasSuffix(s, "/.git") {
		s = strings.TrimRight(strings.TrimSuffix(s, "/.git"), "/")
	}
	name := grammar.BaseName(s)
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
func gitRepoReads(pc *grammar.Parsed, cwd string, ctx *toolspec.DecideCtx) []string {
	dir := gitWorkDir(pc, cwd)
	var gitDir string
	if v := pc.Values("--git-dir"); len(v) > 0 {
		gitDir = toolspec.ResolvePath(dir, v[len(v)-1])
	} else {
		for _, d := range toolspec.DirsUpTo(dir, ctx) {
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
		data, _ := toolspec.ReadProjectFile(gitDir, 1<<16)
		line, _, _ := strings.Cut(string(data), "\n")
		target, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
		if !ok {
			return []string{gitDir}
		}
		gitDir = toolspec.ResolvePath(filepath.Dir(gitDir), strings.TrimSpace(target))
	}
	var out []string
	for _, name := range []string{"packed-refs", "HEAD", "commondir", "objects/info/alternates", "objects/info/http-alternates", "info/grafts", "shallow"} {
		f := filepath.Join(gitDir, name)
		if _, err := os.Lstat(f); err == nil {
			out = append(out, f)
		}
	}
	if data, err := toolspec.ReadProjectFile(filepath.Join(gitDir, "objects/info/alternates"), 1<<16-1); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				out = append(out, toolspec.ResolvePath(filepath.Join(gitDir, "objects"), line))
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
func gitWorkDir(pc *grammar.Parsed, cwd string) string {
	return toolspec.ToolNamed("git").WorkDir(pc, cwd)
}

// gitFixedReads: the repository files git uses by fixed names.
func gitFixedReads(c *toolspec.ToolCall) []string { return gitRepoReads(c.Pc, c.Cwd, c.Ctx) }

// gitDiffReads: git diff compares a directory and a file like diff does.
func gitDiffReads(c *toolspec.ToolCall) []string {
	if len(c.Pc.Subs) > 0 && c.Pc.Subs[0] == "diff" {
		return unixtools.DiffPairReads(c.Pc, gitWorkDir(c.Pc, c.Cwd))
	}
	return nil
}

// checkGit: a git directory outside a ".git" component (a bare repository
// the caller built with cp/sed) has a config the caller could write: its
// textconv/filter/fsmonitor settings would run programs.
func checkGit(c *toolspec.ToolCall) {
	pc, cwd := c.Pc, c.Cwd
	if cwd == "" {
		return
	}
	for _, v := range pc.Values("--work-tree") {
		// git reads (diff, status) and writes (checkout) every file of
		// the work tree, none of which is checked one by one.
		if real := toolspec.ResolvePath(gitWorkDir(pc, cwd), v); !toolspec.InAnyWorkspace(real, c.Ctx) {
			c.Deny(verdict.RiskHigh, "git --work-tree="+grammar.Clip(v)+": "+real+" is outside the workspace roots (its files would be read or written unchecked)")
		}
	}
	for _, v := range pc.Values("--git-dir") {
		if real := toolspec.ResolvePath(gitWorkDir(pc, cwd), v); !hasComponent(real, ".git") {
			c.Deny(verdict.RiskCritical, "git --git-dir="+grammar.Clip(v)+": "+real+" is not inside a .git directory (its config could run programs)")
		}
	}
}

// forceGit: options and environment that depend on the git command (the
// ones every git command runs with are gitExecArgs and gitExecEnv).
func forceGit(c *toolspec.ToolCall) {
	if len(c.Pc.Subs) > 0 {
		switch c.Pc.Subs[0] {
		case "diff":
			// git diff is the one command that runs diff.external by
			// default (a repository's config could name a program): never.
			c.AddOption("--no-ext-diff")
		case "config":
			// git config follows include.path by default when no file is
			// named: a repository's config could include a root-only file.
			c.AddOption("--no-includes")
		case "push":
			// A push to a local repository runs that repository's
			// receive-pack and hooks with its own config (termd's -c
			// settings do not reach it): pushes go over the network
			// protocols only.
			c.SetEnv("GIT_ALLOW_PROTOCOL", "git:http:https:ssh")
		}
	}
	// git looks for a repository in the parents of where it runs: stop it
	// at the workspace roots, so that a repository around a workspace (a
	// home directory kept in git) is never the one a command reads or
	// changes ("git checkout -- ../.bashrc").
	var ceil []string
	for _, ws := range c.Ctx.Workspaces {
		if ws != "/" {
			ceil = append(ceil, filepath.Dir(ws))
		}
	}
	if len(ceil) > 0 {
		c.SetEnv("GIT_CEILING_DIRECTORIES", strings.Join(ceil, ":"))
	}
}
