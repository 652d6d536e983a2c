// Package e2e tests the daemon end to end: the real termd binary on a
// temporary socket, driven through the client library and termctl.
package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func TestBadConfigRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown key", "log_level: info\nsocket_mode: 0777\n", `unknown key "socket_mode"`},
		{"bad value", "log_level: loud\n", `log_level: "loud" is not one of`},
		{"bad duration", "sessions:\n  idle_timeout: forever\n", `"forever" is not a duration`},
		{"bad cap", "sessions:\n  per_principal: 0\n", "sessions.per_principal: 0 is out of range"},
		{"bad role default", "roles:\n  default: operator\n", "roles.default"},
		{"project policy outside", "project_policy: ../elsewhere.yaml\n", "project_policy"},
		{"missing socket group", "socket_group: termd-no-such-group\n", "groupadd --system termd-no-such-group"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml")
			if err := os.WriteFile(cfg, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(harness.Bin(t, "termd"), "--config", cfg, "--socket", filepath.Join(dir, "s.sock"), "--state-dir", filepath.Join(dir, "state"), "--workspace", dir)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("termd started with a bad config; output:\n%s", out)
			}
			if !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), cfg) {
				t.Fatalf("error should name the file and problem %q; got:\n%s", tc.want, out)
			}
			if _, err := os.Stat(filepath.Join(dir, "s.sock")); err == nil {
				t.Fatal("a socket was created although the config is bad")
			}
		})
	}
}

func TestSecretFileWithOpenModeRefused(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("sk-test"), 0o644)
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("adviser:\n  api_key_file: "+key+"\n"), 0o600)
	out, err := exec.Command(harness.Bin(t, "termd"), "--config", cfg, "--socket", filepath.Join(dir, "s.sock"), "--state-dir", filepath.Join(dir, "state"), "--workspace", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "adviser.api_key_file") || !strings.Contains(string(out), "chmod 600") {
		t.Fatalf("want refusal naming adviser.api_key_file and the fix; got err=%v\n%s", err, out)
	}
}

func TestSocketModeAndStatus(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	st, err := os.Stat(d.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode = %v, want socket with 0660", st.Mode())
	}
	dst, _ := os.Stat(filepath.Dir(d.Socket))
	if dst.Mode().Perm() != 0o750 {
		t.Fatalf("socket dir mode = %v, want 0750", dst.Mode().Perm())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := d.Client.Daemon.GetStatus(ctx, &termdv1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Caller.GetRole() != termdv1.Role_ROLE_OPERATOR || s.Caller.GetUid() != uint32(os.Getuid()) {
		t.Fatalf("caller = %v, want the test's uid as operator", s.Caller)
	}
	out, _, code := d.Run("termctl", "status")
	if code != 0 || !strings.Contains(out, "as operator") {
		t.Fatalf("termctl status: code %d\n%s", code, out)
	}
}

func requireRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another uid")
	}
}

func TestRoleComesFromUID(t *testing.T) {
	requireRoot(t)
	d := harness.Start(t, harness.Options{Config: "socket_group: \"65534\"\nroles:\n  agents:\n    uids: [65534]\n"})
	out, errOut, code := d.RunAs(harness.Nobody, "termctl", nil, "status", "-o", "json")
	if code != 0 || !strings.Contains(out, `"role": "agent"`) || !strings.Contains(out, `"uid": 65534`) {
		t.Fatalf("nobody should be an agent: code %d\n%s%s", code, out, errOut)
	}
	out, _, _ = d.Run("termctl", "status", "-o", "json")
	if !strings.Contains(out, `"role": "operator"`) {
		t.Fatalf("root should be an operator:\n%s", out)
	}
}

func TestUnlistedUIDIsRefused(t *testing.T) {
	requireRoot(t)
	d := harness.Start(t, harness.Options{Config: "socket_group: \"65534\"\n"})
	_, errOut, code := d.RunAs(harness.Nobody, "termctl", nil, "status")
	if code == 0 || !strings.Contains(errOut, "uid 65534 has no role") {
		t.Fatalf("want refusal naming the uid; code %d: %s", code, errOut)
	}
}

func TestSIGHUPKeepsLastGoodConfig(t *testing.T) {
	requireRoot(t)
	d := harness.Start(t, harness.Options{Config: "socket_group: \"65534\"\nroles:\n  agents:\n    uids: [65534]\n"})
	role := func() string {
		out, errOut, _ := d.RunAs(harness.Nobody, "termctl", nil, "status", "-o", "json")
		for _, r := range []string{"agent", "viewer"} {
			if strings.Contains(out, `"role": "`+r+`"`) {
				return r
			}
		}
		return "none: " + errOut
	}
	if r := role(); r != "agent" {
		t.Fatalf("start: role %s", r)
	}
	os.WriteFile(d.ConfigPath, []byte("socket_group: \"65534\"\nroles:\n  viewers: {uids: [65534]}\n  bogus: 1\n"), 0o600)
	d.Signal(syscall.SIGHUP)
	waitFor(t, func() bool { return strings.Contains(d.Log(), "keeping the last good config") }, "reload refusal in the log")
	if !strings.Contains(d.Log(), "bogus") {
		t.Fatalf("the log should say what was wrong:\n%s", d.Log())
	}
	if r := role(); r != "agent" {
		t.Fatalf("after a broken reload the old config must hold; role %s", r)
	}
	os.WriteFile(d.ConfigPath, []byte("socket_group: \"65534\"\nroles:\n  viewers: {uids: [65534]}\n"), 0o600)
	d.Signal(syscall.SIGHUP)
	waitFor(t, func() bool { return strings.Contains(d.Log(), "config reloaded") }, "reload in the log")
	if r := role(); r != "viewer" {
		t.Fatalf("after a good reload the new config must hold; role %s", r)
	}
}

func TestSIGTERMStopsCleanly(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	d.Signal(syscall.SIGTERM)
	st, ok := d.Wait(20 * time.Second)
	if !ok || !st.Success() {
		t.Fatalf("termd should exit 0 on SIGTERM: %v", st)
	}
	if _, err := os.Stat(d.Socket); err == nil {
		t.Fatal("socket left behind after shutdown")
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
