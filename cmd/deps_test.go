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

func TestClientsDoNotLinkTheDaemon(t *testing.T) {
	allowed := map[string]map[string]bool{
		// termctl policy lint checks a policy file before it is installed,
		// without a daemon: it links the engine (whose tables are lazy).
		"termctl": {module + "daemon/policy": true, module + "daemon/policy/verdict": true, module + "daemon/policy/decision": true,
			module + "daemon/policy/grammar": true, module + "daemon/policy/toolspec": true, module + "daemon/policy/unixtools": true,
			module + "daemon/policy/devtools": true, module + "daemon/policy/grant": true},
		"termd-mcp":     {},
		"termd-gateway": {},
	}
	for bin, ok := range allowed {
		for _, dep := range goList(t, "-deps", "./cmd/"+bin) {
			if strings.Contains(dep, "sqlite") {
				t.Errorf("%s links %s: the receipt store belongs to the daemon; verify receipts with package receipt", bin, dep)
			}
			for _, heavy := range []string{"github.com/santhosh-tekuri/jsonschema", "github.com/spf13/cobra/doc", "github.com/russross/blackfriday"} {
				if strings.HasPrefix(dep, heavy) {
					t.Errorf("%s links %s: its package initialisation runs at every start (receipt and recipe schemas are checked by internal/schemacheck; man pages come from internal/manpages)", bin, dep)
				}
			}
			if strings.HasPrefix(dep, module+"daemon/") && !ok[dep] {
				t.Errorf("%s links %s: clients reach the daemon through client/ and the socket; move what they share into a package outside daemon/", bin, dep)
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
// internal/wire, not from the client library.
func TestDaemonServerDoesNotImportClient(t *testing.T) {
	for _, pkg := range []string{"./daemon/server", "./daemon/config", "./daemon/broker"} {
		for _, dep := range goList(t, "-deps", pkg) {
			if dep == module+"client" {
				t.Errorf("%s imports %s", pkg, dep)
			}
		}
	}
}

// termctl does no avoidable work before main: the policy engine's tables
// are built on first use, and its whole package initialisation stays small
// (it was 26,000 allocations when the receipt schema validator was linked).
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
	// "init github.com/termd/termd/daemon/policy @12 ms, 0.9 ms clock, 127856 bytes, 1348 allocs"
	total, policyInit := 0, -1
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "init ") {
			continue
		}
		f := strings.Fields(line)
		allocs, err := strconv.Atoi(f[len(f)-2])
		if err != nil {
			t.Fatalf("cannot read %q", line)
		}
		total += allocs
		// The engine and its subpackages (docs/ARCHITECTURE.md) together.
		if f[1] == module+"daemon/policy" || strings.HasPrefix(f[1], module+"daemon/policy/") {
			policyInit = max(policyInit, 0) + allocs
		}
	}
	if runtime.GOOS != "linux" {
		return
	}
	if policyInit < 0 {
		t.Fatalf("no init line for daemon/policy in termctl's inittrace:\n%s", out)
	}
	// The eager tables cost ~7,200 allocations; what is left is a few
	// package-level sets and regular expressions.
	if policyInit > 3000 {
		t.Errorf("daemon/policy's init (with its subpackages) makes %d allocations at termctl's start: build tool tables on first use", policyInit)
	}
	// About 4,100 today: gRPC, protobuf descriptors, the policy engine's sets.
	if total > 8000 {
		t.Errorf("termctl's package initialisation makes %d allocations before main (budget 8,000): find the package with GODEBUG=inittrace=1 and make its work lazy", total)
	}
}
