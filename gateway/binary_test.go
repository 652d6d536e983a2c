package gateway_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
)

// gatewayProc is the real termd-gateway binary in front of a real termd.
type gatewayProc = harness.Gateway

// startGateway runs termd-gateway on a free loopback port and waits for it
// to say where it listens. With d nil, args name the daemons (--daemon).
func startGateway(t *testing.T, d *harness.Daemon, args ...string) *gatewayProc {
	t.Helper()
	if d != nil {
		args = append([]string{"--socket", d.Socket}, args...)
	}
	return harness.StartGateway(t, args...)
}

// runGateway runs termd-gateway expecting it to refuse to start.
func runGateway(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(harness.Bin(t, "termd-gateway"), args...)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("termd-gateway %v kept running; want a refusal", args)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return string(out), code
}

func TestBinaryCreatesPrivateToken(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	g := startGateway(t, d)
	st, err := os.Stat(g.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", st.Mode().Perm())
	}
	if len(g.Token) < 43 {
		t.Errorf("generated token has %d characters, want at least 43 (32 random bytes)", len(g.Token))
	}
	e := &env{t: t, URL: g.URL}
	if code, body := status(t, e.do("GET", "/v1/status", g.Token, nil)); code != 200 || !strings.Contains(body, "token:console") {
		t.Errorf("status with the generated token: %d %s", code, body)
	}
	if code, _ := status(t, e.do("GET", "/v1/status", "", nil)); code != 401 {
		t.Errorf("status without a token: %d, want 401", code)
	}
	if strings.Contains(g.Log(), g.Token) {
		t.Error("the gateway logged its token")
	}
}

func TestBinaryRefusesUnsafeStarts(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.token")
	_ = os.WriteFile(short, []byte("0123456789abcdef0123456789abcdef\n"), 0o600)
	open := filepath.Join(dir, "open.token")
	_ = os.WriteFile(open, []byte(strings.Repeat("k", 64)+"\n"), 0o644)
	_ = os.Chmod(open, 0o644)
	good := filepath.Join(dir, "good.token")
	_ = os.WriteFile(good, []byte(strings.Repeat("k", 64)+"\n"), 0o600)
	cfg := filepath.Join(dir, "gw.yaml")
	_ = os.WriteFile(cfg, []byte("tokens:\n  - name: bob\n    token_file: "+short+"\n    role: viewer\n"), 0o600)
	badRole := filepath.Join(dir, "role.yaml")
	_ = os.WriteFile(badRole, []byte("tokens:\n  - name: bob\n    token_file: "+good+"\n    role: root\n"), 0o600)
	typo := filepath.Join(dir, "typo.yaml")
	_ = os.WriteFile(typo, []byte("tokns:\n  - name: bob\n"), 0o600)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"short token", []string{"--listen", "127.0.0.1:0", "--token-file", short}, "at least 43"},
		{"token readable by others", []string{"--listen", "127.0.0.1:0", "--token-file", open}, "chmod 600"},
		{"short token in config", []string{"--listen", "127.0.0.1:0", "--config", cfg}, "at least 43"},
		{"unknown role", []string{"--listen", "127.0.0.1:0", "--config", badRole}, "not viewer, agent or operator"},
		{"unknown key in config", []string{"--listen", "127.0.0.1:0", "--config", typo}, "gateway config " + typo + ": yaml: unmarshal errors:\n  line 1: field tokns not found"},
		{"missing config", []string{"--listen", "127.0.0.1:0", "--config", filepath.Join(dir, "none.yaml")}, "reading gateway config: open " + filepath.Join(dir, "none.yaml")},
		{"all interfaces without TLS", []string{"--listen", ":0", "--token-file", good}, "without TLS"},
		{"public address without TLS", []string{"--listen", "0.0.0.0:0", "--token-file", good}, "without TLS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, code := runGateway(t, append([]string{"--socket", filepath.Join(dir, "none.sock")}, c.args...)...)
			if code == 0 || !strings.Contains(out, c.want) {
				t.Errorf("exit %d, output %q; want a refusal mentioning %q", code, out, c.want)
			}
		})
	}
}

// A token below operator is refused while the gateway runs as root (here the
// test's uid) or as termd's uid; the same config starts as an unprivileged user.
func TestBinaryRefusesWeakTokensAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the refusal is about running as root")
	}
	d := harness.Start(t, harness.Options{Config: "socket_group: \"65534\"\nroles:\n  operators:\n    uids: [65534]\n"})
	dir, err := os.MkdirTemp("", "termd-gw-id-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	_ = os.Chmod(dir, 0o755)
	tok := filepath.Join(dir, "agent.token")
	_ = os.WriteFile(tok, []byte("Xq3v9LkP2mZr8TfW1yHn6BcJ4sDg0AeU7iOoQxRtYlMb\n"), 0o600)
	_ = os.Chown(tok, 65534, 65534)
	cfg := filepath.Join(dir, "gw.yaml")
	_ = os.WriteFile(cfg, []byte("tokens:\n  - name: bot\n    token_file: "+tok+"\n    role: agent\n"), 0o644)

	out, code := runGateway(t, "--socket", d.Socket, "--listen", "127.0.0.1:0", "--config", cfg)
	if code == 0 || !strings.Contains(out, `refusing to start as root with token "bot" of role agent`) || !strings.Contains(out, "termd-gateway.service") {
		t.Fatalf("as root with an agent token: exit %d, %q; want a refusal naming root, the token and the fix", code, out)
	}

	cmd := exec.Command(harness.Bin(t, "termd-gateway"), "--socket", d.Socket, "--listen", "127.0.0.1:0", "--config", cfg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: harness.Nobody}
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stderr)
	var log strings.Builder
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "termd-gateway listening") {
			return
		}
	}
	t.Fatalf("as uid 65534 the same config should start:\n%s", log.String())
}
