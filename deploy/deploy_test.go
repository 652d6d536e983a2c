package deploy

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/client"
	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/policy"
	"github.com/termd/termd/internal/harness"
	"github.com/termd/termd/internal/manpages"
	"github.com/termd/termd/internal/wire"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func repo() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func runInstall(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(repo(), "scripts", "install.sh"), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("install.sh %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatalf("expected %s: %v", p, err)
	}
	return st.Mode().Perm()
}

// TestInstallTreeVerifyAndUninstall installs into a temporary prefix the way
// `make install PREFIX=...` does, checks the tree and modes, verifies the
// installed units with systemd-analyze, and uninstalls.
func TestInstallTreeVerifyAndUninstall(t *testing.T) {
	// BINDIR as `make build man` leaves it: the binaries and man/man1.
	bin := t.TempDir()
	for _, b := range []string{"termd", "termd-launch", "termctl", "termd-mcp", "termd-gateway"} {
		if err := os.Symlink(harness.Bin(t, b), filepath.Join(bin, b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := manpages.Write(filepath.Join(bin, "man", "man1")); err != nil {
		t.Fatal(err)
	}
	prefix := t.TempDir()
	out := runInstall(t, []string{"TERMD_INSTALL_NO_ACCOUNTS=1"}, prefix, bin)
	if !strings.Contains(out, "not creating the termd group") {
		t.Errorf("install did not say it skipped the accounts:\n%s", out)
	}
	want := map[string]os.FileMode{
		"bin/termd": 0o755, "bin/termd-launch": 0o755, "bin/termctl": 0o755, "bin/termd-mcp": 0o755, "bin/termd-gateway": 0o755,
		"lib/systemd/system/termd.service":          0o644,
		"lib/systemd/system/termd.socket":           0o644,
		"lib/systemd/system/termd-operator.socket":  0o644,
		"lib/systemd/system/termd-gateway.service":  0o644,
		"share/systemd/user/termd.service":          0o644,
		"share/systemd/user/termd.socket":           0o644,
		"share/termd/launchd/dev.termd.termd.plist": 0o644,
		"share/doc/termd/CONFIG.md":                 0o644,
		"share/man/man1/termctl-run.1":              0o644,
		"share/man/man1/termd.1":                    0o644,
		"share/man/man1/termd-mcp.1":                0o644,
		"share/man/man1/termd-gateway.1":            0o644,
		"etc/termd":                                 0o755,
		"etc/termd/termd.yaml":                      0o644,
		"etc/termd/policy.yaml":                     0o644,
	}
	for p, m := range want {
		if got := mode(t, filepath.Join(prefix, p)); got != m {
			t.Errorf("%s: mode %04o, want %04o", p, got, m)
		}
	}
	checkInstalledUnits(t, prefix)
	checkInstalledConfig(t, prefix)

	t.Run("systemd-analyze verify", func(t *testing.T) { verifyInstalledUnits(t, prefix) })

	// A second install keeps the administrator's config.
	if err := os.WriteFile(filepath.Join(prefix, "etc/termd/termd.yaml"), []byte("log_level: debug\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = runInstall(t, []string{"TERMD_INSTALL_NO_ACCOUNTS=1"}, prefix, bin)
	if y, _ := os.ReadFile(filepath.Join(prefix, "etc/termd/termd.yaml")); string(y) != "log_level: debug\n" || !strings.Contains(out, "kept existing") {
		t.Errorf("reinstall replaced the config:\n%s", out)
	}

	out = runInstall(t, nil, "--uninstall", prefix)
	for p := range want {
		if strings.HasPrefix(p, "etc/") {
			continue
		}
		if _, err := os.Stat(filepath.Join(prefix, p)); err == nil {
			t.Errorf("uninstall left %s", p)
		}
	}
	if _, err := os.Stat(filepath.Join(prefix, "etc/termd/termd.yaml")); err != nil {
		t.Error("uninstall removed the config")
	}
	if !strings.Contains(out, "Kept: configuration") || !strings.Contains(out, "/var/lib/termd") {
		t.Errorf("uninstall does not say what it kept:\n%s", out)
	}
}

// checkInstalledUnits checks the installed system units point at the prefix
// and carry the settings the docs promise (sandboxing, socket modes, the
// operator socket).
func checkInstalledUnits(t *testing.T, prefix string) {
	unit, _ := os.ReadFile(filepath.Join(prefix, "lib/systemd/system/termd.service"))
	if !strings.Contains(string(unit), "ExecStart="+prefix+"/bin/termd --config "+prefix+"/etc/termd/termd.yaml") {
		t.Errorf("unit does not point at the prefix:\n%s", unit)
	}
	for _, s := range []string{"KillMode=mixed", "Delegate=yes", "StateDirectory=termd", "ReadWritePaths=-/home -/root -/srv -/var/tmp -/run/termd", "ProtectSystem=strict", "PrivateTmp=yes", "Restart=on-failure"} {
		if !strings.Contains(string(unit), s) {
			t.Errorf("termd.service lacks %s", s)
		}
	}
	sock, _ := os.ReadFile(filepath.Join(prefix, "lib/systemd/system/termd.socket"))
	for _, s := range []string{"SocketGroup=termd", "SocketMode=0660", "ListenStream=/run/termd/termd.sock"} {
		if !strings.Contains(string(sock), s) {
			t.Errorf("termd.socket lacks %s", s)
		}
	}
	op, _ := os.ReadFile(filepath.Join(prefix, "lib/systemd/system/termd-operator.socket"))
	for _, s := range []string{"SocketMode=0600", "SocketUser=root", "ListenStream=/run/termd/termd-operator.sock", "FileDescriptorName=termd-operator", "Service=termd.service"} {
		if !strings.Contains(string(op), s) {
			t.Errorf("termd-operator.socket lacks %s", s)
		}
	}
	if !strings.Contains(string(unit), "Sockets=termd.socket termd-operator.socket") {
		t.Error("termd.service does not inherit the operator socket (Sockets=)")
	}
}

// checkInstalledConfig checks the installed config and policy: every key
// named, the system values set, the policy the embedded default.
func checkInstalledConfig(t *testing.T, prefix string) {
	// The installed config names every key and sets the system values.
	y, _ := os.ReadFile(filepath.Join(prefix, "etc/termd/termd.yaml"))
	c := config.Default()
	if err := config.Parse(c, y); err != nil {
		t.Fatalf("installed termd.yaml does not parse: %v", err)
	}
	if c.SocketGroup != "termd" || c.Socket != "/run/termd/termd.sock" || c.StateDir != "/var/lib/termd" || c.Policy != prefix+"/etc/termd/policy.yaml" {
		t.Errorf("installed config: socket %q group %q state %q policy %q", c.Socket, c.SocketGroup, c.StateDir, c.Policy)
	}
	for _, k := range config.Keys() {
		short := k.Name[strings.LastIndex(k.Name, ".")+1:]
		if !strings.Contains(string(y), short+":") {
			t.Errorf("installed config lacks key %s", k.Name)
		}
	}
	pol, _ := os.ReadFile(filepath.Join(prefix, "etc/termd/policy.yaml"))
	if string(pol) != string(policy.DefaultYAML()) {
		t.Error("installed policy.yaml is not the embedded default")
	}
	if _, err := policy.LoadFile(filepath.Join(prefix, "etc/termd/policy.yaml")); err != nil {
		t.Errorf("installed policy does not load: %v", err)
	}
}

// verifyInstalledUnits runs systemd-analyze verify on the installed system
// and user units: no complaint.
func verifyInstalledUnits(t *testing.T, prefix string) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		harness.Missing(t, "systemd-analyze is not installed: run scripts/ci-deps.sh")
	}
	sys := filepath.Join(prefix, "lib/systemd/system")
	cmd := exec.Command(sa, "verify", filepath.Join(sys, "termd.socket"), filepath.Join(sys, "termd-operator.socket"), filepath.Join(sys, "termd.service"), filepath.Join(sys, "termd-gateway.service"))
	if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify (system units): %v\n%s", err, out)
	}
	rt := t.TempDir()
	usr := filepath.Join(prefix, "share/systemd/user")
	cmd = exec.Command(sa, "--user", "verify", filepath.Join(usr, "termd.socket"), filepath.Join(usr, "termd.service"))
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+rt)
	if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze --user verify (user units): %v\n%s", err, out)
	}
}

// TestLaunchdPlistsAreWellFormed: the property lists parse as XML and name
// the daemon binary.
func TestLaunchdPlistsAreWellFormed(t *testing.T) {
	for _, f := range []string{"dev.termd.termd.plist", "dev.termd.termd.user.plist"} {
		data, err := os.ReadFile(filepath.Join(repo(), "deploy", "launchd", f))
		if err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(strings.NewReader(string(data)))
		for {
			if _, err := dec.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
		if !strings.Contains(string(data), "/usr/local/bin/termd") || !strings.Contains(string(data), "<key>Label</key>") {
			t.Errorf("%s does not run termd", f)
		}
	}
}

// TestSocketActivation starts termd the way systemd does: the listening
// socket is inherited as fd 3 with LISTEN_FDS=1 and LISTEN_PID = termd's pid.
// A client gets through, and on SIGTERM termd leaves the socket file (it
// belongs to the service manager).
func TestSocketActivation(t *testing.T) {
	termd := harness.Bin(t, "termd")
	dir, err := os.MkdirTemp("", "termd-act-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "run", "termd.sock")
	ws := filepath.Join(dir, "work")
	os.MkdirAll(filepath.Dir(sock), 0o755)
	os.MkdirAll(ws, 0o755)
	// The service manager's two sockets (termd.socket, termd-operator.socket).
	opSock := filepath.Join(dir, "run", "termd-operator.sock")
	var files []*os.File
	for _, p := range []string{sock, opSock} {
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		ul := l.(*net.UnixListener)
		ul.SetUnlinkOnClose(false)
		f, err := ul.File()
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		files = append(files, f)
	}
	logf, _ := os.Create(filepath.Join(dir, "termd.log"))
	defer logf.Close()
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, termd,
		"--socket", sock, "--state-dir", filepath.Join(dir, "state"), "--workspace", ws)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LISTEN_FDS=2", "LISTEN_FDNAMES=termd:termd-operator"}
	cmd.ExtraFiles = files
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		f.Close()
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "termd.log"))
			t.Logf("termd log:\n%s", b)
		}
	})
	// Root's client goes through the operator socket; told of none, through
	// the shared one. Both are served.
	for _, op := range []string{"", filepath.Join(dir, "no-operator.sock")} {
		t.Setenv(wire.OperatorSocketEnv, op)
		c, err := client.Dial(sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.WaitReady(ctxT(t)); err != nil {
			t.Fatalf("client did not get through the inherited socket (operator socket %q): %v", op, err)
		}
		st, err := c.Daemon.GetStatus(ctxT(t), &termdv1.GetStatusRequest{})
		if err != nil || st.Caller.GetRole() != termdv1.Role_ROLE_OPERATOR {
			t.Fatalf("status over the activated socket (operator socket %q): %v %v", op, st, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "termd.log")); !strings.Contains(string(b), "operator_socket="+opSock) {
		t.Fatalf("termd did not take the inherited operator socket:\n%s", b)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		if waitErr != nil {
			t.Fatalf("termd exit: %v", waitErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("termd did not stop on SIGTERM")
	}
	for _, p := range []string{sock, opSock} {
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("termd removed the socket the service manager owns: %v", err)
		}
	}
	// The service manager still holds the socket: a new connection queues
	// until the next start instead of failing.
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("socket no longer accepts connections after termd stopped: %v", err)
	}
	conn.Close()
}

// TestSIGTERMEndsRunsWithReceipts: on SIGTERM (systemctl stop) a command that
// finishes within shutdown_grace succeeds, and one that does not is ended by
// termd with a "cancelled" receipt that says why.
func TestSIGTERMEndsRunsWithReceipts(t *testing.T) {
	d := harness.Start(t, harness.Options{Config: "shutdown_grace: 3s\n"})
	start := func(argv ...string) string {
		s, err := d.Client.Sessions.CreateSession(ctxT(t), &termdv1.CreateSessionRequest{Label: strings.Join(argv, " ")})
		if err != nil {
			t.Fatal(err)
		}
		p, err := d.Client.Plans.CreatePlan(ctxT(t), &termdv1.CreatePlanRequest{SessionId: s.Session.Id, Request: &termdv1.CommandRequest{Argv: argv}})
		if err != nil || p.Plan.State != termdv1.PlanState_PLAN_STATE_PLANNED {
			t.Fatalf("plan %v: %v %v", argv, p, err)
		}
		if _, err := d.Client.Executions.Execute(ctxT(t), &termdv1.ExecuteRequest{PlanId: p.Plan.Id}); err != nil {
			t.Fatal(err)
		}
		return s.Session.Id
	}
	long := start("sleep", "30")
	short := start("sleep", "1")
	d.Signal(syscall.SIGTERM)
	st, ok := d.Wait(60 * time.Second)
	if !ok {
		t.Fatal("termd did not stop within 60s of SIGTERM")
	}
	if !st.Success() {
		t.Fatalf("termd exit after SIGTERM: %v", st)
	}
	d.Restart()
	receipt := func(session string) map[string]any {
		r, err := d.Client.Receipts.ListReceipts(ctxT(t), &termdv1.ListReceiptsRequest{SessionId: session})
		if err != nil || len(r.Receipts) != 1 {
			t.Fatalf("receipts of session %s: %v %v", session, r, err)
		}
		g, err := d.Client.Receipts.GetReceipt(ctxT(t), &termdv1.GetReceiptRequest{ReceiptId: r.Receipts[0].Id})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(g.ReceiptJson), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if r := receipt(long); r["status"] != "cancelled" || !strings.Contains(r["detail"].(string), "shutting down") {
		t.Errorf("sleep 30 after SIGTERM: status %v detail %q, want cancelled because termd is shutting down", r["status"], r["detail"])
	}
	if r := receipt(short); r["status"] != "succeeded" {
		t.Errorf("sleep 1 within the grace: status %v, want succeeded", r["status"])
	}
}
