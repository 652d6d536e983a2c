package devtools

import (
	"fmt"
	"strings"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
)

// postGoPackages: packages named by directory ("/srv/x", "../y", "./...")
// are read, recursively for "...": checked like any read (go doc /root/x
// would print root-only sources).
func postGoPackages(p *grammar.Parsed) {
	for i, op := range p.Operands {
		if v := op.Value; strings.HasPrefix(v, "/") || strings.HasPrefix(v, ".") {
			p.Operands[i].Kind = grammar.KPathRead
			p.Operands[i].Value = strings.TrimSuffix(strings.TrimSuffix(v, "..."), "/")
			if p.Operands[i].Value == "" {
				p.Operands[i].Value = "/"
			}
			p.Recursive = p.Recursive || strings.HasSuffix(v, "...")
		}
	}
}

// postGoFmt: go fmt rewrites the files of the packages it is given. Packages
// named by directory or file are checked as writes; an import path ("std",
// "golang.org/x/...") may name the standard library or the module cache.
func postGoFmt(p *grammar.Parsed) {
	for i, op := range p.Operands {
		v := op.Value
		if strings.HasPrefix(v, ".") || strings.HasPrefix(v, "/") || strings.HasSuffix(v, ".go") {
			p.Operands[i].Kind = grammar.KPathWrite
			continue
		}
		p.Deny(verdict.RiskHigh, "go fmt %s: an import path may name packages outside the workspace (the standard library, the module cache); name packages by directory (./..., ./pkg)", grammar.Clip(v))
	}
}

var _ = toolspec.Family(registerGo)

// registerGo: the go command. Build, test, run and generate run project
// code; inspection stays offline (forceGoOffline).
func registerGo() {
	R, W := grammar.KPathRead, grammar.KPathWrite
	buildFlags := grammar.Opts(grammar.Flags("-v -x -n -a -race -msan -asan -cover -trimpath -linkshared -modcacherw -work -json -i"),
		grammar.List(grammar.O("-buildvcs?"), grammar.O("-covermode="), grammar.O("-coverpkg="), grammar.O("-p="), grammar.O("-tags="), grammar.O("-ldflags="), grammar.O("-gcflags="), grammar.O("-asmflags="), grammar.O("-buildmode="), grammar.O("-compiler=").DenyWith("chooses the compiler program"), grammar.O("-gccgoflags=").DenyWith("passes options to gccgo, which may name programs to run"), grammar.O("-installsuffix="), grammar.O("-mod="), grammar.O("-modfile=", R).MovesDir(), grammar.O("-overlay=").DenyWith("replaces files with the files a JSON file names (not checked)"), grammar.O("-pgo=", R), grammar.O("-pkgdir=", W), grammar.O("-o=", W), grammar.O("-C=", R).MovesDir(),
			grammar.O("-toolexec=").DenyWith("runs a program around every compiler step"), grammar.O("-exec=").DenyWith("runs a program around the binary"), grammar.O("-vettool=").DenyWith("runs a vet program chosen by the caller")))
	testFlags := grammar.Opts(buildFlags, grammar.Flags("-benchmem -failfast -short -c -fullpath -cpuprofile"), grammar.List(grammar.O("-run="), grammar.O("-skip="), grammar.O("-bench="), grammar.O("-benchtime="), grammar.O("-count="), grammar.O("-cpu="), grammar.O("-fuzz="), grammar.O("-fuzztime="), grammar.O("-fuzzminimizetime="), grammar.O("-list="), grammar.O("-parallel="), grammar.O("-shuffle="), grammar.O("-timeout="), grammar.O("-vet="), grammar.O("-coverprofile=", W), grammar.O("-memprofile=", W), grammar.O("-blockprofile=", W), grammar.O("-mutexprofile=", W), grammar.O("-outputdir=", W), grammar.O("-trace=", W), grammar.O("-memprofilerate="), grammar.O("-blockprofilerate="), grammar.O("-mutexprofilefraction="), grammar.O("-test.v?"), grammar.O("-test.run=")))
	// -cpuprofile takes a value; fix the flag above
	for i, op := range testFlags {
		if op.Names[0] == "-cpuprofile" {
			testFlags[i] = grammar.O("-cpuprofile=", W)
		}
	}
	goSub := func(name string, c *grammar.CmdSpec) *grammar.CmdSpec {
		c.Name = name
		c.LongSingleDash = true
		c.Opts = append(c.Opts, grammar.O("-h|-help"))
		return c
	}
	modSubs := grammar.Subs(
		goSub("download", &grammar.CmdSpec{Net: true, Fetch: true, Opts: grammar.List(grammar.O("-json"), grammar.O("-x"), grammar.O("-reuse=", R))}),
		goSub("tidy", &grammar.CmdSpec{Net: true, Write: true, Opts: grammar.List(grammar.O("-v"), grammar.O("-e"), grammar.O("-x"), grammar.O("-diff"), grammar.O("-go="), grammar.O("-compat="))}),
		goSub("graph", &grammar.CmdSpec{Opts: grammar.List(grammar.O("-x"), grammar.O("-go="))}),
		goSub("why", &grammar.CmdSpec{Opts: grammar.List(grammar.O("-m"), grammar.O("-vendor"))}),
		goSub("verify", &grammar.CmdSpec{}),
		goSub("init", &grammar.CmdSpec{Write: true}),
		goSub("vendor", &grammar.CmdSpec{Write: true, Net: true, Opts: grammar.List(grammar.O("-v"), grammar.O("-e"), grammar.O("-o=", W))}),
		goSub("edit", &grammar.CmdSpec{Write: true, Operand: W, Opts: grammar.List(grammar.O("-fmt"), grammar.O("-print"), grammar.O("-json"), grammar.O("-module="), grammar.O("-go="), grammar.O("-toolchain="), grammar.O("-require="), grammar.O("-droprequire="), grammar.O("-exclude="), grammar.O("-dropexclude="), grammar.O("-replace="), grammar.O("-dropreplace="), grammar.O("-retract="), grammar.O("-dropretract="), grammar.O("-tool="), grammar.O("-droptool="), grammar.O("-godebug="), grammar.O("-dropgodebug="))}),
	)
	goSubs := grammar.Subs(
		goSub("build", &grammar.CmdSpec{Code: true, Write: true, Opts: buildFlags}),
		goSub("install", &grammar.CmdSpec{Code: true, Write: true, Net: true, Opts: buildFlags}),
		goSub("test", &grammar.CmdSpec{Code: true, RestMarker: "-args", Opts: testFlags}),
		goSub("run", &grammar.CmdSpec{Code: true, Posix: true, Opts: buildFlags}),
		goSub("vet", &grammar.CmdSpec{Post: postGoPackages, Opts: buildFlags}),
		goSub("fmt", &grammar.CmdSpec{Write: true, Post: postGoFmt, Opts: grammar.List(grammar.O("-n"), grammar.O("-x"), grammar.O("-mod="))}),
		goSub("env", &grammar.CmdSpec{Opts: grammar.List(grammar.O("-json"), grammar.O("-changed"), grammar.O("-w").DenyWith("writes the go env file that later go commands obey"), grammar.O("-u").DenyWith("writes the go env file that later go commands obey"))}),
		goSub("version", &grammar.CmdSpec{Operand: R, Post: func(p *grammar.Parsed) { p.Recursive = true }, Opts: grammar.List(grammar.O("-m"), grammar.O("-v"), grammar.O("-json"))}),
		goSub("list", &grammar.CmdSpec{Post: postGoPackages, Opts: grammar.Opts(buildFlags, grammar.List(grammar.O("-f="), grammar.O("-m"), grammar.O("-u"), grammar.O("-e"), grammar.O("-deps"), grammar.O("-test"), grammar.O("-find"), grammar.O("-export").RunsCode(), grammar.O("-compiled").RunsCode(), grammar.O("-versions"), grammar.O("-retracted"), grammar.O("-reuse=", R)))}),
		goSub("mod", &grammar.CmdSpec{NeedSub: true, Subs: modSubs}),
		goSub("get", &grammar.CmdSpec{Net: true, Write: true, Opts: grammar.Opts(buildFlags, grammar.List(grammar.O("-t"), grammar.O("-u?"), grammar.O("-tool")))}),
		goSub("doc", &grammar.CmdSpec{Post: postGoPackages, Opts: grammar.List(grammar.O("-all"), grammar.O("-c"), grammar.O("-cmd"), grammar.O("-short"), grammar.O("-src"), grammar.O("-u"), grammar.O("-http").DenyWith("starts a web server"))}),
		goSub("generate", &grammar.CmdSpec{Code: true, Write: true, Opts: grammar.Opts(buildFlags, grammar.List(grammar.O("-run="), grammar.O("-skip=")))}),
		goSub("clean", &grammar.CmdSpec{Write: true, Opts: grammar.Opts(buildFlags, grammar.List(grammar.O("-cache"), grammar.O("-testcache"), grammar.O("-modcache"), grammar.O("-fuzzcache"), grammar.O("-r")))}),
		goSub("tool", &grammar.CmdSpec{Code: true, Posix: true, Opts: grammar.List(grammar.O("-n"), grammar.O("-modfile=", R).MovesDir())}),
	)
	toolspec.Register("go", &toolspec.ToolSpec{
		Grammar:  &grammar.CmdSpec{NeedSub: true, Subs: goSubs, LongSingleDash: true, Opts: grammar.List(grammar.O("-C=", R).MovesDir(), grammar.O("-h|-help"))},
		Entry:    &toolspec.EntryFiles{Names: []string{"go.mod", "go.work"}, WalksUp: true, Chdir: "-C", Extra: goModfiles},
		EnvReads: goWorkFile,
		Check:    checkGoFlags,
		Runs:     []string{"git"}, // VCS stamping, git dependencies
		Forced:   forceGoOffline,
		// go vet and go list run the toolchain's own tools, and read-only go
		// commands fill the build and module caches too.
		SandboxExec:  []string{"$PROGDIR/../pkg/tool"},
		SandboxCache: []string{"~/.cache/go-build", "~/go/pkg/mod"},
	})
}

// goToolSafeOptions are the compiler, assembler and linker options termd
// passes through -gcflags, -asmflags and -ldflags: none names a file to read
// or write or a program to run. Anything else (-cpuprofile, -traceprofile,
// -o, -extld, -extar, -coveragecfg, ...) is refused.
var goToolSafeOptions = grammar.Set("-N -l -m -S -B -C -e -h -w -s -d -v -live -std -complete -dwarf -dwarflocationlists -lang -c -smallframes -spectre -race -msan -asan -wb -nolocalimports -shared -dynlink -X -linkmode -buildmode -compressdwarf -strictdups -checklinkname -dumpdep -H -V -E -trimpath -p -installsuffix")

// goFlagProblems names what in a go command's tool flags termd cannot check.
func goFlagProblems(pc *grammar.Parsed) []string {
	var out []string
	for _, u := range pc.Opts {
		switch u.Name {
		case "-gcflags", "-asmflags", "-ldflags":
		case "-buildvcs":
			// Offline inspection runs without VCS stamping (git status in the
			// repository would run its config's programs).
			if !pc.Code && !pc.Net && u.Has && u.Value != "false" {
				out = append(out, "go -buildvcs="+u.Value+": inspection runs without version-control stamping (it would run git in the repository)")
			}
			continue
		default:
			continue
		}
		// cmd/go splits the value on blanks and strips quotes; termd drops
		// every quote character first, so no quoting can hide an option.
		val := strings.NewReplacer(`"`, " ", `'`, " ").Replace(u.Value)
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
				out = append(out, fmt.Sprintf("go %s: %s is not an option termd passes to the Go tools (it may name a file or a program); allowed: -N -l -m -S -d -s -w -X -trimpath and similar", u.Name, grammar.Clip(tok)))
			}
		}
	}
	return out
}

// goModfiles: -modfile names the go.mod go reads.
func goModfiles(pc *grammar.Parsed, dir, _ string, _ []string) []string {
	return toolspec.OptionFiles(pc, dir, "-modfile")
}

// goWorkFile: GOWORK names a file go reads (and prints pieces of when it
// cannot parse it), whichever program runs go.
func goWorkFile(env map[string]string) []string {
	if v := env["GOWORK"]; v != "" && v != "off" {
		return []string{v}
	}
	return nil
}

func checkGoFlags(c *toolspec.ToolCall) {
	for _, why := range goFlagProblems(c.Pc) {
		c.Deny(verdict.RiskHigh, why)
	}
}

// forceGoOffline: go inspection commands classified as offline must stay
// offline: any go command may download missing modules or a newer toolchain.
func forceGoOffline(c *toolspec.ToolCall) {
	if c.Pc.Net || c.Pc.Code || c.Pc.Unparsed {
		return
	}
	c.SetEnv("GOPROXY", "off")
	c.SetEnv("GOTOOLCHAIN", "local")
	// go vet (and list with cgo files) runs the C preprocessor over cgo
	// preambles: `#include "/etc/shadow"` would print the file.
	c.SetEnv("CGO_ENABLED", "0")
	// Inspection needs no version-control stamp (git status in the repo).
	c.SetEnv("GOFLAGS", "-buildvcs=false")
}
