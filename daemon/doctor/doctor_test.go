package doctor_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/termd/termd/internal/harness"
	"github.com/termd/termd/internal/testpki"
)

func doctor(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(harness.Bin(t, "termd"), append([]string{"doctor"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

func wantLine(t *testing.T, out, pattern string) {
	t.Helper()
	if !regexp.MustCompile(`(?m)` + pattern).MatchString(out) {
		t.Errorf("doctor output lacks a line matching %q:\n%s", pattern, out)
	}
}

// TestDoctorOnThisMachine runs `termd doctor` against a running daemon: it
// explains the kernel features and the socket/state modes and passes; a
// world-readable receipt key makes it FAIL with a non-zero exit.
func TestDoctorOnThisMachine(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	out, code := doctor(t, "--socket", d.Socket, "--state-dir", d.StateDir)
	if code != 0 {
		t.Fatalf("doctor exit %d on a healthy daemon:\n%s", code, out)
	}
	wantLine(t, out, `^(OK|WARN) +cgroups +.*cgroup`)
	wantLine(t, out, `^(OK|WARN) +netns +.*network namespaces`)
	wantLine(t, out, `^(OK|WARN) +landlock +.*Landlock`)
	wantLine(t, out, `^(OK|WARN) +subreaper `)
	wantLine(t, out, `^OK +socket +socket directory .* has mode 0750`)
	wantLine(t, out, `^OK +socket +socket .*termd.sock has mode 0660`)
	wantLine(t, out, `^OK +state +state directory .* has mode 0700`)
	wantLine(t, out, `^OK +keys +key files .* 0600`)
	wantLine(t, out, `^OK +policy +embedded default policy .*sandboxed_workspace_writes: allow, plain workspace writes run without approval`)
	wantLine(t, out, `^OK +daemon +termd .* answers at `)
	wantLine(t, out, `^OK +storage +state directory holds .* free on its filesystem \(floor storage.min_free_bytes 512.0 MiB\)`)
	if os.Geteuid() == 0 {
		wantLine(t, out, `^OK +egress +allow-lists registries \(9 entries\); proxy checked: listener inside a new network namespace, a fetch through it to a pinned name answered`)
	} else {
		wantLine(t, out, `^WARN +egress +allow-lists registries .*needs Linux network namespaces and termd running as root`)
	}
	if strings.Contains(out, "FAIL ") {
		t.Errorf("FAIL on a healthy daemon:\n%s", out)
	}

	key := filepath.Join(d.StateDir, "keys", "receipt-ed25519.pem")
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = doctor(t, "--socket", d.Socket, "--state-dir", d.StateDir)
	if code == 0 {
		t.Fatalf("doctor passed with a world-readable key:\n%s", out)
	}
	wantLine(t, out, `^FAIL +keys +key file .*receipt-ed25519.pem has mode 0644`)
	wantLine(t, out, `fix: chmod 600 .*receipt-ed25519.pem`)

	js, code := doctor(t, "--socket", d.Socket, "--state-dir", d.StateDir, "-o", "json")
	if code == 0 {
		t.Fatal("json doctor passed with a world-readable key")
	}
	var doc struct {
		Checks []struct{ Area, Status, Message, Fix string }
		Failed bool
	}
	if err := json.Unmarshal([]byte(js[:strings.LastIndex(js, "}")+1]), &doc); err != nil {
		t.Fatalf("doctor -o json: %v\n%s", err, js)
	}
	if !doc.Failed || len(doc.Checks) < 10 {
		t.Fatalf("json doctor: %+v", doc)
	}
	_ = os.Chmod(key, 0o600)
}

// TestDoctorSaysWhenAgentsAndOperatorsShareAUID and rejects an invalid config.
func TestDoctorRolesAndBadConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "termd.yaml")
	os.WriteFile(cfg, []byte("roles:\n  operators: {uids: [1000]}\n  agents: {uids: [1000]}\nadviser: {base_url: \"http://models.example.com\"}\n"), 0o644)
	out, code := doctor(t, "--config", cfg, "--socket", filepath.Join(dir, "none.sock"), "--state-dir", filepath.Join(dir, "state"))
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	wantLine(t, out, `^WARN +roles +agents and operators share uid 1000`)
	wantLine(t, out, `^WARN +adviser +.*plain http`)
	wantLine(t, out, `^WARN +daemon +`)

	os.WriteFile(cfg, []byte("storage: {min_free_bytes: 1125899906842624}\n"), 0o644)
	out, _ = doctor(t, "--config", cfg, "--socket", filepath.Join(dir, "none.sock"), "--state-dir", filepath.Join(dir, "state"))
	wantLine(t, out, `^WARN +storage +.*below the floor, new executions are refused`)

	os.WriteFile(cfg, []byte("shutdown_grace: soon\n"), 0o644)
	out, code = doctor(t, "--config", cfg, "--socket", filepath.Join(dir, "none.sock"), "--state-dir", filepath.Join(dir, "state"))
	if code == 0 {
		t.Fatalf("doctor passed an invalid config:\n%s", out)
	}
	wantLine(t, out, `^FAIL +config +config is invalid: .*"soon" is not a duration`)
}

// Doctor names each credential and whether its source is readable, never
// its value.
func TestDoctorCredentials(t *testing.T) {
	dir := t.TempDir()
	const value = "doctor-must-not-print-this-value"
	good, loose := filepath.Join(dir, "good"), filepath.Join(dir, "loose")
	os.WriteFile(good, []byte(value), 0o600)
	os.WriteFile(loose, []byte(value), 0o644)
	cfg := filepath.Join(dir, "termd.yaml")
	os.WriteFile(cfg, []byte("credentials:\n  - {name: GOOD_TOKEN, file: "+good+", programs: [git]}\n  - {name: LOOSE_TOKEN, file: "+loose+", programs: [git]}\n  - {name: ANY_TOKEN, file: "+good+"}\n"), 0o644)
	out, _ := doctor(t, "--config", cfg, "--socket", filepath.Join(dir, "none.sock"), "--state-dir", filepath.Join(dir, "state"))
	wantLine(t, out, `^OK +credentials +credential GOOD_TOKEN \(file .*/good\) is readable`)
	wantLine(t, out, `^WARN +credentials +credential LOOSE_TOKEN .*has mode 0644.*chmod 600`)
	wantLine(t, out, `^WARN +credentials +credential ANY_TOKEN may be given to any program`)
	if strings.Contains(out, value) {
		t.Fatalf("doctor printed a credential's value:\n%s", out)
	}
}

// TestDoctorInUserModeTellsTheKernelApart: run as an unprivileged uid (user
// mode), doctor must not blame the kernel for what only termd's uid lacks
// (it said "kernel < 5.14" on a 6.x kernel when it could not make a probe
// cgroup), and says how offline commands are kept off the network.
func TestDoctorInUserModeTellsTheKernelApart(t *testing.T) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var major, minor int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
	if os.Geteuid() != 0 {
		t.Fatal("this test runs doctor as another uid: run it as root (as CI does)")
	}
	cmd := exec.Command(harness.Bin(t, "termd"), "doctor", "--socket", filepath.Join(t.TempDir(), "none.sock"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	b, _ := cmd.CombinedOutput()
	out := string(b)
	wantLine(t, out, `^WARN +privilege +running as uid 65534 \(user mode\)`)
	if (major > 5 || major == 5 && minor >= 14) && strings.Contains(out, "kernel < 5.14") {
		t.Errorf("doctor blames the kernel (%d.%d) in user mode:\n%s", major, minor, out)
	}
	if abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION); errno == 0 && int(abi) >= 4 {
		wantLine(t, out, `^WARN +netns +no network namespaces for termd's uid 65534: commands the policy marks offline are kept off TCP by Landlock`)
	}
}

// Doctor checks the mutual-TLS listener: an expiring server certificate is
// a WARN with the date, the address missing from its SANs a WARN, a key
// others may read a FAIL, and what the certificates map to is listed.
func TestDoctorTLSListener(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.MustCA("fleet CA")
	srv, err := ca.ServerWith("termd", testpki.Options{IPs: []net.IP{net.ParseIP("10.0.0.5")}, NotAfter: time.Now().Add(10 * 24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	f, err := srv.WriteAll(dir, "server", ca)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "termd.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("listen_tls:\n  address: 127.0.0.1:7443\n  cert_file: %s\n  key_file: %s\n  client_ca_file: %s\n  clients:\n    - {name: gw-1, cn: gw-1, role: operator, gateway: true}\n    - {name: ci, cn: ci, role: agent, run_as: root}\n", f.Cert, f.Key, f.CA)), 0o644)
	args := []string{"--config", cfg, "--socket", filepath.Join(dir, "none.sock"), "--state-dir", filepath.Join(dir, "state")}
	out, code := doctor(t, args...)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	wantLine(t, out, `^OK +tls +listen_tls.key_file .* is private`)
	wantLine(t, out, `^WARN +tls +server certificate .* expires on .* \(in (9|10) days\)`)
	wantLine(t, out, `^WARN +tls +the server certificate .* has no IP SAN 127.0.0.1`)
	wantLine(t, out, `^OK +tls +client CA CN=fleet CA is valid until`)
	wantLine(t, out, `^OK +tls +listening on 127.0.0.1:7443 .*operator: gw-1 \(gateway\); agent: ci as root`)

	os.Chmod(f.Key, 0o644)
	out, code = doctor(t, args...)
	if code == 0 {
		t.Fatalf("doctor passed a world-readable TLS key:\n%s", out)
	}
	wantLine(t, out, `^FAIL +tls +listen_tls.key_file: .*has mode 0644.*chmod 600`)
}
