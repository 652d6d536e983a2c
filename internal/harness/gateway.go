package harness

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Gateway is the real termd-gateway binary, started by StartGateway.
type Gateway struct {
	URL       string
	TokenFile string
	Token     string
	cmd       *exec.Cmd
	log       *lockedLog
}

// Log is what the gateway wrote to stderr so far.
func (g *Gateway) Log() string { return g.log.String() }

// lockedLog collects the gateway's stderr while tests read it.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var gatewayListenRE = regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+)`)

// StartGateway runs termd-gateway with args (which say which daemons it
// serves: --socket, or --daemon/--fleet) on a free loopback port, with an
// operator token in a new token file, and waits for it to say where it
// listens. It is stopped (SIGTERM) when t ends; its log is printed when t
// failed.
func StartGateway(t testing.TB, args ...string) *Gateway {
	t.Helper()
	dir := t.TempDir()
	g := &Gateway{TokenFile: filepath.Join(dir, "gateway.token"), log: &lockedLog{}}
	all := append([]string{"--listen", "127.0.0.1:0", "--token-file", g.TokenFile}, args...)
	g.cmd = exec.Command(Bin(t, "termd-gateway"), all...)
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := g.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			g.log.WriteString(line + "\n")
			if m := gatewayListenRE.FindStringSubmatch(line); m != nil {
				select {
				case urlc <- m[1]:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		_ = g.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = g.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("termd-gateway log:\n%s", g.log.String())
		}
	})
	select {
	case g.URL = <-urlc:
	case <-time.After(60 * time.Second):
		t.Fatalf("termd-gateway did not start:\n%s", g.log.String())
	}
	b, err := os.ReadFile(g.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	g.Token = strings.TrimSpace(string(b))
	return g
}

// Browser is what a test driving the web console in real headless Chromium
// needs: node, Chromium and web/e2e with its npm packages (playwright-core).
// scripts/ci-deps.sh installs them; a missing one skips the test, or fails
// it under TERMD_TEST_REQUIRE_ALL (Missing).
type Browser struct {
	Node, Chromium, Dir string
}

// ConsoleBrowser finds node, Chromium ($CHROMIUM or /usr/bin/chromium) and
// web/e2e.
func ConsoleBrowser(t testing.TB) Browser {
	t.Helper()
	b := Browser{Dir: filepath.Join(repoRoot(), "web", "e2e")}
	if _, err := os.Stat(filepath.Join(b.Dir, "node_modules", "playwright-core")); err != nil {
		Missing(t, "web/e2e/node_modules is missing: run scripts/ci-deps.sh (npm ci in web/e2e) to run the browser tests")
	}
	b.Chromium = os.Getenv("CHROMIUM")
	if b.Chromium == "" {
		b.Chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(b.Chromium); err != nil {
		Missing(t, "Chromium is missing at %s: run scripts/ci-deps.sh (apt-get install chromium)", b.Chromium)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		Missing(t, "node is not installed: install Node.js 18 or later")
	}
	b.Node = node
	return b
}
