package devtools

import (
	"path/filepath"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
)

var _ = toolspec.Family(registerRust)

// registerRust: cargo. A checkout's .cargo/config.toml chooses the programs
// cargo runs, so every subcommand but version is project code.
func registerRust() {
	R, W := grammar.KPathRead, grammar.KPathWrite
	cargoGlobal := grammar.Opts(grammar.Flags("-v|--verbose -q|--quiet --frozen --locked --offline -h|--help -V|--version --list"), grammar.List(grammar.O("--color="), grammar.O("--manifest-path=", R).MovesDir(), grammar.O("--config=").DenyWith(toolspec.WhyConfig), grammar.O("-Z=").DenyWith("enables unstable features"), grammar.O("-C=").DenyWith("is an unstable option")))
	cargoSub := grammar.Opts(grammar.Flags("--workspace --all --lib --bins --examples --tests --benches --all-targets --all-features --no-default-features -r|--release --keep-going --no-run --no-fail-fast --doc --future-incompat-report --ignore-rust-version --unit-graph --no-deps --all-packages --fix --allow-dirty --allow-staged --allow-no-vcs --dry-run --document-private-items --check"),
		grammar.List(grammar.O("-p|--package="), grammar.O("--exclude="), grammar.O("--bin="), grammar.O("--example="), grammar.O("--test="), grammar.O("--bench="), grammar.O("-F|--features="), grammar.O("--profile="), grammar.O("-j|--jobs="), grammar.O("--target="), grammar.O("--target-dir=", W), grammar.O("--message-format="), grammar.O("--timings?"), grammar.O("--format-version="), grammar.O("--depth="), grammar.O("-e|--edges="), grammar.O("-i|--invert="), grammar.O("--prefix="), grammar.O("--charset="), grammar.O("--filter-platform="), grammar.O("--open").DenyWith("opens a browser")))
	cs := func(name string, c *grammar.CmdSpec) *grammar.CmdSpec {
		c.Name = name
		c.Inherit = true
		c.Opts = cargoSub
		return c
	}
	toolspec.Register("cargo", &toolspec.ToolSpec{Runs: []string{"git"}, Entry: &toolspec.EntryFiles{Names: []string{"Cargo.toml", "build.rs"}, WalksUp: true, Extra: cargoManifests}, Grammar: &grammar.CmdSpec{NeedSub: true, Opts: cargoGlobal, Aliases: map[string]string{"b": "build", "t": "test", "r": "run", "c": "check", "d": "doc"},
		Subs: grammar.Subs(cs("build", &grammar.CmdSpec{Code: true, Net: true, Write: true}), cs("test", &grammar.CmdSpec{Code: true, Net: true, Write: true}), cs("run", &grammar.CmdSpec{Code: true, Net: true, Write: true}),
			cs("check", &grammar.CmdSpec{Code: true, Net: true, Write: true}), cs("clippy", &grammar.CmdSpec{Code: true, Net: true, Write: true}), cs("doc", &grammar.CmdSpec{Code: true, Net: true, Write: true}), cs("bench", &grammar.CmdSpec{Code: true, Net: true, Write: true}),
			// A repository's .cargo/config.toml and rust-toolchain.toml choose the
			// programs cargo runs (rustc, wrappers, runners): every cargo command
			// in a checkout runs project-chosen code.
			cs("fmt", &grammar.CmdSpec{Code: true, Write: true}), cs("fetch", &grammar.CmdSpec{Code: true, Net: true}), cs("tree", &grammar.CmdSpec{Code: true, Net: true}), cs("metadata", &grammar.CmdSpec{Code: true, Net: true}), cs("clean", &grammar.CmdSpec{Code: true, Write: true}), cs("update", &grammar.CmdSpec{Code: true, Net: true, Write: true}), cs("version", &grammar.CmdSpec{}))}})
}

// cargoManifests: --manifest-path names a Cargo.toml (relative to where
// cargo was started) and so its build.rs.
func cargoManifests(pc *grammar.Parsed, _, cwd string, _ []string) []string {
	var out []string
	for _, m := range pc.Values("--manifest-path") {
		m = toolspec.ResolvePath(cwd, m)
		out = append(out, m, filepath.Join(filepath.Dir(m), "build.rs"))
	}
	return out
}
