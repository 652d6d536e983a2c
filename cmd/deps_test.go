// Package cmd_test holds the rule that dependencies point one way: the
// clients reach the daemon only through client/ and the socket, and share
// with it only the small packages outside daemon/ (receipt, internal/wire,
// internal/cmdline). A client that linked the daemon's storage or engine
// would grow, start slower and could bypass the socket.
package cmd_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/termd/termd/"

// goList runs `go list` in the module root.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.Fields(string(out))
}

// goListLines is goList split by lines (for -f templates with spaces).
func goListLines(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// clientBinaries are the binaries that reach termd only through its socket.
var clientBinaries = []string{"termctl", "termd-mcp", "termd-gateway"}

func TestClientsDoNotLinkTheDaemon(t *testing.T) {
	for _, bin := range clientBinaries {
		for _, dep := range goList(t, "-deps", "./cmd/"+bin) {
			if strings.Contains(dep, "sqlite") {
				t.Errorf("%s links %s: the receipt store belongs to the daemon; verify receipts with package receipt", bin, dep)
			}
			for _, heavy := range []string{"github.com/santhosh-tekuri/jsonschema", "github.com/spf13/cobra/doc", "github.com/russross/blackfriday"} {
				if strings.HasPrefix(dep, heavy) {
					t.Errorf("%s links %s: its package initialisation runs at every start (receipt and recipe schemas are checked by internal/schemacheck; man pages come from internal/manpages)", bin, dep)
				}
			}
			if strings.HasPrefix(dep, module+"daemon/") || dep == module+"daemon" {
				t.Errorf("%s links %s: clients reach the daemon through client/ and the socket (`termctl policy lint` asks termd's LintPolicy); move what they share into a package outside daemon/", bin, dep)
			}
		}
	}
}

// What each client package may import of termd's own (docs/ARCHITECTURE.md,
// "Layout"): client/ only the API and internal/wire; the three front ends
// client/, the API and the small shared packages (internal/…, receipt,
// recipe), never each other or daemon/…; their mains only their front end;
// the bench floors only the API and their shared root (bench/internal/floorcmd,
// which imports nothing of termd's).
func TestClientPackagesImportWhatTheyMay(t *testing.T) {
	shared := func(imp string) bool {
		switch {
		case imp == "proto/termd/v1", imp == "receipt", imp == "recipe":
			return true
		case strings.HasPrefix(imp, "internal/") && imp != "internal/harness":
			return true
		}
		return false
	}
	frontEnd := func(extra ...string) func(string) bool {
		return func(imp string) bool {
			return imp == "client" || shared(imp) || slices.Contains(extra, imp)
		}
	}
	only := func(allowed ...string) func(string) bool {
		return func(imp string) bool { return slices.Contains(allowed, imp) }
	}
	may := map[string]func(string) bool{
		"client":                  only("internal/wire", "proto/termd/v1"),
		"cli":                     frontEnd(),
		"mcpbridge":               frontEnd(),
		"gateway":                 frontEnd("gateway/internal/gen/termd/v1", "web"),
		"cmd/termctl":             only("cli"),
		"cmd/termd-mcp":           only("mcpbridge"),
		"cmd/termd-gateway":       only("gateway"),
		"bench/clifloor":          only("proto/termd/v1", "bench/internal/floorcmd"),
		"bench/mcpfloor":          only("proto/termd/v1", "bench/internal/floorcmd"),
		"bench/internal/floorcmd": only(),
	}
	var pkgs []string
	for p := range may {
		pkgs = append(pkgs, "./"+p)
	}
	for _, line := range goListLines(t, append([]string{"-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, pkgs...)...) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(f[0], module)
		ok := may[pkg]
		if ok == nil {
			t.Errorf("go list answered for %s, which has no rule here", f[0])
			continue
		}
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			if own := strings.TrimPrefix(imp, module); !ok(own) {
				t.Errorf("%s imports %s: see docs/ARCHITECTURE.md for what a client package may import", pkg, own)
			}
		}
	}
}

// Only termd-gateway links grpc-gateway for REST handlers of termd's own:
// they are generated into gateway/internal/gen, not beside the messages
// every binary imports, so the others do not initialise its runtime at
// every start. The one exception is termd's OTLP exporter: OpenTelemetry's
// generated collector package (go.opentelemetry.io/proto/otlp) carries its
// own grpc-gateway handlers, and nothing else of termd's may import it.
func TestOnlyTheGatewayLinksGrpcGateway(t *testing.T) {
	const gw = "github.com/grpc-ecosystem/grpc-gateway/"
	for _, bin := range []string{"termd", "termctl", "termd-mcp", "termd-launch"} {
		for _, line := range goListLines(t, "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./cmd/"+bin) {
			f := strings.Fields(line)
			if len(f) == 0 || strings.HasPrefix(f[0], gw) {
				continue
			}
			for _, imp := range f[1:] {
				if !strings.HasPrefix(imp, gw) {
					continue
				}
				if bin == "termd" && strings.HasPrefix(f[0], "go.opentelemetry.io/proto/otlp/") {
					continue
				}
				t.Errorf("%s links %s (imported by %s): REST handlers belong to termd-gateway (buf.gen.yaml generates them into gateway/internal/gen)", bin, imp, f[0])
			}
		}
	}
	linked := false
	for _, dep := range goList(t, "-deps", "./cmd/termd-gateway") {
		linked = linked || dep == module+"gateway/internal/gen/termd/v1"
	}
	if !linked {
		t.Errorf("termd-gateway does not link %sgateway/internal/gen/termd/v1: where are its REST handlers?", module)
	}
}

// The daemon's transport takes the socket path and metadata keys from
// internal/wire, not from the client library; what the daemon's own command
// line asks a running termd (`termd doctor`) is handed in by cmd/termd.
func TestDaemonDoesNotImportClient(t *testing.T) {
	for _, line := range goListLines(t, "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./daemon/...") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], module+"daemon") {
			continue
		}
		for _, imp := range f[1:] {
			if imp == module+"client" {
				t.Errorf("%s imports %s: pass what it needs of a running termd in from cmd/termd (see daemon.Deps)", f[0], imp)
			}
		}
	}
}

// termctl does no avoidable work before main: it links no daemon package
// (the policy engine's init was ~1,300 allocations of it), and its whole
// package initialisation stays small (it was 26,000 allocations when the
// receipt schema validator was linked).
func TestTermctlInitIsSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds termctl")
	}
	bin := filepath.Join(t.TempDir(), "termctl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/termctl")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--help")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, _ := cmd.CombinedOutput()
	// "init github.com/termd/termd/internal/wire @12 ms, 0.9 ms clock, 127856 bytes, 1348 allocs"
	total, lines := 0, 0
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "init ") {
			continue
		}
		lines++
		f := strings.Fields(line)
		allocs, err := strconv.Atoi(f[len(f)-2])
		if err != nil {
			t.Fatalf("cannot read %q", line)
		}
		total += allocs
		if strings.HasPrefix(f[1], module+"daemon") {
			t.Errorf("termctl initialises %s at start: clients link no daemon package", f[1])
		}
	}
	if runtime.GOOS != "linux" {
		return
	}
	if lines == 0 {
		t.Fatalf("no init lines in termctl's inittrace:\n%s", out)
	}
	// About 2,300 today: gRPC and the protobuf descriptors.
	if total > 8000 {
		t.Errorf("termctl's package initialisation makes %d allocations before main (budget 8,000): find the package with GODEBUG=inittrace=1 and make its work lazy", total)
	}
}

// daemonFloors are the floors of the daemon's packages (docs/ARCHITECTURE.md,
// "Floors"): a package imports termd's daemon packages only from lower
// floors, and on its own floor only its family's (daemon/policy/…,
// daemon/runner/…) and daemon/config. So the broker's parts (floor 3) never
// import the broker or each other, and nothing below the broker reaches up.
var daemonFloors = map[string]int{
	// 1: vocabulary and leaves, importing no daemon package.
	"daemon/domain": 1, "daemon/errdefs": 1, "daemon/policy/verdict": 1, "daemon/adviser": 1,
	"daemon/adviser/fakeapi": 1, "daemon/egress": 1, "daemon/events": 1, "daemon/metrics": 1,
	"daemon/netns": 1, "daemon/receiptstore": 1, "daemon/runner/cgroup": 1,
	"daemon/runner/proctree": 1, "daemon/sandbox/launcher": 1,
	// 2: the engines: configuration, policy, sandbox, runner, search.
	"daemon/config": 2, "daemon/credentials": 2, "daemon/search": 2, "daemon/recipes": 2,
	"daemon/otlpexport": 2, "daemon/sandbox": 2, "daemon/runner": 2, "daemon/runner/pool": 2,
	"daemon/policy": 2, "daemon/policy/decision": 2, "daemon/policy/grammar": 2,
	"daemon/policy/toolspec": 2, "daemon/policy/unixtools": 2, "daemon/policy/devtools": 2,
	"daemon/policy/grant": 2,
	// 3: the broker's parts, one noun each.
	"daemon/broker/advice": 3, "daemon/broker/executions": 3, "daemon/broker/grants": 3,
	"daemon/broker/hostfs": 3, "daemon/broker/journal": 3, "daemon/broker/projects": 3,
	"daemon/broker/receiptq": 3, "daemon/broker/stages": 3, "daemon/broker/terminals": 3,
	"daemon/broker/wsnet": 3, "daemon/broker/wire": 3, "daemon/broker/bounds": 3,
	"daemon/broker/sessions": 3,
	"daemon/broker/plans":    3,
	// 4: the broker, holding the parts.
	"daemon/broker": 4,
	// 5: the edges: the gRPC server and termd doctor.
	"daemon/server": 5, "daemon/doctor": 5,
	// 6: the assembly and the config doc generator.
	"daemon": 6, "daemon/config/gen": 6,
}

// family is a package's family for imports on its own floor.
func family(pkg string) string {
	for _, f := range []string{"daemon/policy", "daemon/runner"} {
		if pkg == f || strings.HasPrefix(pkg, f+"/") {
			return f
		}
	}
	return pkg
}

func TestDaemonFloors(t *testing.T) {
	seen := map[string]bool{}
	for _, line := range goListLines(t, "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./daemon/...") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(f[0], module)
		if pkg == "daemon/e2e" || strings.Contains(pkg, "/testdata/") {
			continue
		}
		floor, ok := daemonFloors[pkg]
		if !ok {
			t.Errorf("package %s has no floor: add it to daemonFloors and to the Floors table in docs/ARCHITECTURE.md", pkg)
			continue
		}
		seen[pkg] = true
		for _, imp := range f[1:] {
			rel, ours := strings.CutPrefix(imp, module)
			if !ours || (rel != "daemon" && !strings.HasPrefix(rel, "daemon/")) {
				continue
			}
			to, ok := daemonFloors[rel]
			switch {
			case !ok:
				t.Errorf("%s imports %s, which has no floor", pkg, rel)
			case to > floor:
				t.Errorf("%s (floor %d) imports %s (floor %d): dependencies point down; move what both need to a lower floor", pkg, floor, rel, to)
			case to == floor && family(pkg) != family(rel) && rel != "daemon/config":
				t.Errorf("%s imports %s on its own floor %d: only a family's packages (daemon/policy/…, daemon/runner/…) and daemon/config may; a broker part reaches the broker or another part through an interface it defines", pkg, rel, floor)
			}
		}
	}
	for pkg := range daemonFloors {
		if !seen[pkg] {
			t.Errorf("daemonFloors names %s, which does not exist (any more)", pkg)
		}
	}
}
