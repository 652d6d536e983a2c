package policy

import (
	"path/filepath"
)

var _ = family(registerRust)

// registerRust: cargo. A checkout's .cargo/config.toml chooses the programs
// cargo runs, so every subcommand but version is project code.
func registerRust() {
	R, W := KPathRead, KPathWrite
	cargoGlobal := opts(flags("-v|--verbose -q|--quiet --frozen --locked --offline -h|--help -V|--version --list"), list(o("--color="), o("--manifest-path=", R).movesDir(), o("--config=").denyWith(whyConfig), o("-Z=").denyWith("enables unstable features"), o("-C=").denyWith("is an unstable option")))
	cargoSub := opts(flags("--workspace --all --lib --bins --examples --tests --benches --all-targets --all-features --no-default-features -r|--release --keep-going --no-run --no-fail-fast --doc --future-incompat-report --ignore-rust-version --unit-graph --no-deps --all-packages --fix --allow-dirty --allow-staged --allow-no-vcs --dry-run --document-private-items --check"),
		list(o("-p|--package="), o("--exclude="), o("--bin="), o("--example="), o("--test="), o("--bench="), o("-F|--features="), o("--profile="), o("-j|--jobs="), o("--target="), o("--target-dir=", W), o("--message-format="), o("--timings?"), o("--format-version="), o("--depth="), o("-e|--edges="), o("-i|--invert="), o("--prefix="), o("--charset="), o("--filter-platform="), o("--open").denyWith("opens a browser")))
	cs := func(name string, c *cmdSpec) *cmdSpec { c.name = name; c.inherit = true; c.opts = cargoSub; return c }
	register("cargo", &toolSpec{runs: []string{"git"}, entry: &entryFiles{names: []string{"Cargo.toml", "build.rs"}, walksUp: true, extra: cargoManifests}, grammar: &cmdSpec{needSub: true, opts: cargoGlobal, aliases: map[string]string{"b": "build", "t": "test", "r": "run", "c": "check", "d": "doc"},
		subs: subs(cs("build", &cmdSpec{code: true, net: true, write: true}), cs("test", &cmdSpec{code: true, net: true, write: true}), cs("run", &cmdSpec{code: true, net: true, write: true}),
			cs("check", &cmdSpec{code: true, net: true, write: true}), cs("clippy", &cmdSpec{code: true, net: true, write: true}), cs("doc", &cmdSpec{code: true, net: true, write: true}), cs("bench", &cmdSpec{code: true, net: true, write: true}),
			// A repository's .cargo/config.toml and rust-toolchain.toml choose the
			// programs cargo runs (rustc, wrappers, runners): every cargo command
			// in a checkout runs project-chosen code.
			cs("fmt", &cmdSpec{code: true, write: true}), cs("fetch", &cmdSpec{code: true, net: true}), cs("tree", &cmdSpec{code: true, net: true}), cs("metadata", &cmdSpec{code: true, net: true}), cs("clean", &cmdSpec{code: true, write: true}), cs("update", &cmdSpec{code: true, net: true, write: true}), cs("version", &cmdSpec{}))}})
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
