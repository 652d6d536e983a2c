package gateway_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
)

// TestConsoleInBrowser drives the web console in real headless Chromium
// (web/e2e/console.test.mjs, playwright-core) against the real termd-gateway
// binary in front of a real termd. scripts/ci-deps.sh installs Chromium and
// the npm packages, so CI never skips this.
func TestConsoleInBrowser(t *testing.T) {
	e2e, chromium, node := browserTools(t)
	// A credential the console's plan form asks for by name; its value must
	// appear nowhere on the pages.
	credDir, err := os.MkdirTemp("", "termd-console-cred-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(credDir) })
	credValue := "consoleCredentialValue0123456789"
	if err := os.WriteFile(filepath.Join(credDir, "token"), []byte(credValue), 0o600); err != nil {
		t.Fatal(err)
	}
	// An upstream an egress execution reaches by name through termd's proxy
	// (allow-list "console"; the name is pinned to the local server).
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintln(w, "hello from upstream.test")
	}))
	t.Cleanup(upstream.Close)
	upPort := upstream.Listener.Addr().(*net.TCPAddr).Port
	d := harness.Start(t, harness.Options{AskWrites: true, // touch is the page's command that needs approval
		Config: "credentials:\n  - {name: CONSOLE_TOKEN, file: " + filepath.Join(credDir, "token") + ", programs: [git]}\n" +
			fmt.Sprintf("egress:\n  allow_lists:\n    console: [\"upstream.test:%d\"]\n  hosts:\n    upstream.test: 127.0.0.1\n", upPort)})
	// The egress probe: once the page watches (the go file), one fetch the
	// proxy refuses, then one it carries.
	probe := "import os, sys, time, urllib.request\n" +
		"refused, allowed, go = sys.argv[1:4]\n" +
		"while not os.path.exists(go):\n    time.sleep(0.2)\n" +
		"try:\n    urllib.request.urlopen(refused, timeout=20).read()\nexcept Exception as e:\n    print('refused:', e)\n" +
		"print(urllib.request.urlopen(allowed, timeout=20).read().decode())\n"
	if err := os.WriteFile(filepath.Join(d.Workspace, "egress_probe.py"), []byte(probe), 0o644); err != nil {
		t.Fatal(err)
	}
	// A recipe that prints, waits and prints again: the page is reloaded while it runs.
	if err := os.WriteFile(filepath.Join(d.Workspace, "Makefile"), []byte("slow:\n\t@echo before\n\t@sleep 3\n\t@echo after\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(d.Workspace, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Workspace, "logs", "app.log"), []byte("INFO started\nERROR disk full on /var/data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, d)
	cmd := exec.Command(node, "console.test.mjs")
	cmd.Dir = e2e
	cmd.Env = append(os.Environ(), "TERMD_CONSOLE_URL="+g.URL, "TERMD_CONSOLE_TOKEN="+g.Token, "CHROMIUM="+chromium, "TERMCTL="+harness.Bin(t, "termctl"), "TERMD_SOCKET="+d.Socket, "TERMD_WORKSPACE="+d.Workspace, "TERMD_TEST_CREDENTIAL_VALUE="+credValue,
		fmt.Sprintf("TERMD_UPSTREAM=upstream.test:%d", upPort))
	out, err := cmd.CombinedOutput()
	t.Logf("console.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("browser tests failed: %v", err)
	}
}

// browserTools finds web/e2e with its npm packages, Chromium and node.
func browserTools(t *testing.T) (e2e, chromium, node string) {
	t.Helper()
	b := harness.ConsoleBrowser(t)
	return b.Dir, b.Chromium, b.Node
}

// TestFleetConsoleInBrowser drives the console of one real termd-gateway
// serving three real termd daemons (web/e2e/fleet.test.mjs): every host's
// plans in one queue with their host, approval carried to the owning host,
// a stopped host shown down while the others are served, and its events
// resuming after its restart. The script asks this test to stop and
// restart host c ("@@ stop c", "@@ restart c" on its stdout) and waits for
// an ack file.
func TestFleetConsoleInBrowser(t *testing.T) {
	e2e, chromium, node := browserTools(t)
	ds := map[string]*harness.Daemon{}
	var args []string
	for _, n := range []string{"a", "b", "c"} {
		ds[n] = harness.Start(t, harness.Options{AskWrites: true})
		args = append(args, "--daemon", n+"="+ds[n].Socket)
	}
	g := startGateway(t, nil, args...)
	ctl := t.TempDir()
	cmd := exec.Command(node, "fleet.test.mjs")
	cmd.Dir = e2e
	cmd.Env = append(os.Environ(), "TERMD_CONSOLE_URL="+g.URL, "TERMD_CONSOLE_TOKEN="+g.Token, "CHROMIUM="+chromium,
		"TERMD_FLEET_CTL="+ctl, "TERMD_WORKSPACE_A="+ds["a"].Workspace, "TERMD_WORKSPACE_B="+ds["b"].Workspace)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	acks := 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		what, ok := strings.CutPrefix(line, "@@ ")
		if !ok {
			continue
		}
		switch what {
		case "stop c":
			ds["c"].Stop()
		case "restart c":
			ds["c"].Restart()
		default:
			t.Errorf("fleet.test.mjs asked for %q", what)
			continue
		}
		acks++
		if err := os.WriteFile(filepath.Join(ctl, fmt.Sprintf("ack-%d", acks)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	err = cmd.Wait()
	t.Logf("fleet.test.mjs:\n%s", out.String())
	if err != nil {
		t.Fatalf("fleet browser tests failed: %v", err)
	}
}
