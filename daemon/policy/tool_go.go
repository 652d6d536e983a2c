package policy

import (
	"fmt"
	"strings"
)

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

var _ = family(registerGo)

// registerGo: the go command. Build, test, run and generate run project
// code; inspection stays offline (forceGoOffline).
func registerGo() {
	R, W := KPathRead, KPathWrite
	buildFlags := opts(flags("-v -x -n -a -race -msan -asan -cover -trimpath -linkshared -modcacherw -work -json -i"),
		list(o("-buildvcs?"), o("-covermode="), o("-coverpkg="), o("-p="), o("-tags="), o("-ldflags="), o("-gcflags="), o("-asmflags="), o("-buildmode="), o("-compiler=").denyWith("chooses the compiler program"), o("-gccgoflags=").denyWith("passes options to gccgo, which may name programs to run"), o("-installsuffix="), o("-mod="), o("-modfile=", R).movesDir(), o("-overlay=").denyWith("replaces files with the files a JSON file names (not checked)"), o("-pgo=", R), o("-pkgdir=", W), o("-o=", W), o("-C=", R).movesDir(),
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
		goSub("download", &cmdSpec{net: true, fetch: true, opts: list(o("-json"), o("-x"), o("-reuse=", R))}),
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
		goSub("tool", &cmdSpec{code: true, posix: true, opts: list(o("-n"), o("-modfile=", R).movesDir())}),
	)
	register("go", &toolSpec{
		grammar:  &cmdSpec{needSub: true, subs: goSubs, longSingleDash: true, opts: list(o("-C=", R).movesDir(), o("-h|-help"))},
		entry:    &entryFiles{names: []string{"go.mod", "go.work"}, walksUp: true, chdir: "-C", extra: goModfiles},
		envReads: goWorkFile,
		check:    checkGoFlags,
		runs:     []string{"git"}, // VCS stamping, git dependencies
		forced:   forceGoOffline,
		// go vet and go list run the toolchain's own tools, and read-only go
		// commands fill the build and module caches too.
		sandboxExec:  []string{"$PROGDIR/../pkg/tool"},
		sandboxCache: []string{"~/.cache/go-build", "~/go/pkg/mod"},
	})
}

// goToolSafeOptions are the compiler, assembler and linker options termd
// passes through -gcflags, -asmflags and -ldflags: none names a file to read
// or write or a program to run. Anything else (-cpuprofile, -traceprofile,
// -o, -extld, -extar, -coveragecfg, ...) is refused.
var goToolSafeOptions = set("-N -l -m -S -B -C -e -h -w -s -d -v -live -std -complete -dwarf -dwarflocationlists -lang -c -smallframes -spectre -race -msan -asan -wb -nolocalimports -shared -dynlink -X -linkmode -buildmode -compressdwarf -strictdups -checklinkname -dumpdep -H -V -E -trimpath -p -installsuffix")

// goFlagProblems names what in a go command's tool flags termd cannot check.
func goFlagProblems(pc *parsed) []string {
	var out []string
	for _, u := range pc.opts {
		switch u.name {
		case "-gcflags", "-asmflags", "-ldflags":
		case "-buildvcs":
			// Offline inspection runs without VCS stamping (git status in the
			// repository would run its config's programs).
			if !pc.code && !pc.net && u.has && u.value != "false" {
				out = append(out, "go -buildvcs="+u.value+": inspection runs without version-control stamping (it would run git in the repository)")
			}
			continue
		default:
			continue
		}
		// cmd/go splits the value on blanks and strips quotes; termd drops
		// every quote character first, so no quoting can hide an option.
		val := strings.NewReplacer(`"`, " ", `'`, " ").Replace(u.value)
		for _, tok := range strings.Fields(val) {
			if i := strings.IndexByte(tok, '='); i > 0 && !strings.HasPrefix(tok, "-") {
				tok = tok[i+1:] // "all=-N" → "-N"
			}
			if !strings.HasPrefix(tok, "-") {
				continue // a value of the option before it (-X main.v=1)
			}
			name := strings.TrimPrefix(tok, "-")
			if i := strings.IndexByte(name, '='); i >= 0 {
				name = name[:i]
			}
			if !goToolSafeOptions["-"+strings.TrimPrefix(name, "-")] {
				out = append(out, fmt.Sprintf("go %s: %s is not an option termd passes to the Go tools (it may name a file or a program); allowed: -N -l -m -S -d -s -w -X -trimpath and similar", u.name, clip(tok)))
			}
		}
	}
	return out
}

// goModfiles: -modfile names the go.mod go reads.
func goModfiles(pc *parsed, dir, _ string, _ []string) []string {
	return optionFiles(pc, dir, "-modfile")
}

// goWorkFile: GOWORK names a file go reads (and prints pieces of when it
// cannot parse it), whichever program runs go.
func goWorkFile(env map[string]string) []string {
	if v := env["GOWORK"]; v != "" && v != "off" {
		return []string{v}
	}
	return nil
}

func checkGoFlags(c *toolCall) {
	for _, why := range goFlagProblems(c.pc) {
		c.deny(RiskHigh, why)
	}
}

// forceGoOffline: go inspection commands classified as offline must stay
// offline: any go command may download missing modules or a newer toolchain.
func forceGoOffline(c *toolCall) {
	if c.pc.net || c.pc.code || c.pc.unparsed {
		return
	}
	c.setEnv("GOPROXY", "off")
	c.setEnv("GOTOOLCHAIN", "local")
	// go vet (and list with cgo files) runs the C preprocessor over cgo
	// preambles: `#include "/etc/shadow"` would print the file.
	c.setEnv("CGO_ENABLED", "0")
	// Inspection needs no version-control stamp (git status in the repo).
	c.setEnv("GOFLAGS", "-buildvcs=false")
}
