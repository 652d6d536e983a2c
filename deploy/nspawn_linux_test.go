package deploy

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
)

// The real test of the shipped units: a minimal Debian booted by
// systemd-nspawn, with termd installed by scripts/install.sh, driven through
// its own systemd (docs/OPERATIONS.md, "Tested for real").

// rootfsSuite and rootfsPackages make the cached root file system; the cache
// key covers them and the mirror, so changing one builds a new one.
const (
	rootfsSuite    = "bookworm"
	rootfsPackages = "systemd,systemd-sysv,dbus,libpam-systemd"
)

// landlockFilter lets the container's processes use Landlock, which
// nspawn's default seccomp filter refuses.
const landlockFilter = "landlock_create_ruleset landlock_add_rule landlock_restrict_self"

// debianMirror is the first Debian mirror apt is configured with here
// (TERMD_DEBIAN_MIRROR overrides it).
func debianMirror() string {
	if m := os.Getenv("TERMD_DEBIAN_MIRROR"); m != "" {
		return m
	}
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	for _, f := range files {
		data, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(data), "\n") {
			if u, ok := strings.CutPrefix(strings.TrimSpace(line), "URIs:"); ok {
				for _, uri := range strings.Fields(u) {
					if !strings.Contains(uri, "security") {
						return uri
					}
				}
			}
		}
	}
	if data, err := os.ReadFile("/etc/apt/sources.list"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && f[0] == "deb" && !strings.Contains(f[1], "security") && !strings.HasPrefix(f[1], "[") {
				return f[1]
			}
		}
	}
	return "http://deb.debian.org/debian"
}

// cachedRootfs returns a minimal Debian root file system with systemd,
// made by debootstrap once and kept under the build directory
// ($TERMD_ROOTFS_CACHE, else bin/rootfs), keyed by suite, packages and
// mirror. Tests never write to it: they boot an overlay of it.
func cachedRootfs(t *testing.T) string {
	mirror := debianMirror()
	sum := sha256.Sum256([]byte(rootfsSuite + "\x00minbase\x00" + rootfsPackages + "\x00" + mirror))
	base := os.Getenv("TERMD_ROOTFS_CACHE")
	if base == "" {
		base = filepath.Join(repo(), "bin", "rootfs")
	}
	dir := filepath.Join(base, rootfsSuite+"-"+hex.EncodeToString(sum[:6]))
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// One builder at a time (two test binaries may ask together).
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "lib/systemd/systemd")); err == nil {
		t.Logf("root file system: cached %s", root)
		return root
	}
	tmp := root + ".tmp"
	_ = os.RemoveAll(tmp)
	start := time.Now()
	cmd := exec.Command("debootstrap", "--variant=minbase", "--include="+rootfsPackages, rootfsSuite, tmp, mirror)
	out, err := cmd.CombinedOutput()
	if err != nil {
		_ = os.RemoveAll(tmp)
		harness.Missing(t, "debootstrap %s from %s failed, so systemd-nspawn has nothing to boot: %v\n%s", rootfsSuite, mirror, err, tail(string(out), 2000))
	}
	if err := os.Rename(tmp, root); err != nil {
		t.Fatal(err)
	}
	t.Logf("root file system: built %s with debootstrap in %s", root, time.Since(start).Round(time.Second))
	return root
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// container is a booted systemd-nspawn container.
type container struct {
	t    *testing.T
	root string // the overlay it runs on
	pid  int    // its systemd (PID 1 inside)
}

// sh runs argv in the container (all its namespaces) and returns its
// combined output and exit code.
func (c *container) sh(argv ...string) (string, int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(c.pid), "-a", "--"}, argv...)...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LANG=C.UTF-8", "NO_COLOR=1"}
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			c.t.Fatalf("nsenter %v: %v", argv, err)
		}
		code = ee.ExitCode()
	}
	return string(out), code
}

// must is sh that fails the test unless argv exits 0.
func (c *container) must(argv ...string) string {
	c.t.Helper()
	out, code := c.sh(argv...)
	if code != 0 {
		c.t.Fatalf("%s: exit %d\n%s", strings.Join(argv, " "), code, out)
	}
	return out
}

// as runs a shell command line as user in the container, in dir.
func (c *container) as(user, dir, line string) (string, int) {
	c.t.Helper()
	return c.sh("runuser", "-u", user, "--", "sh", "-c", "cd "+dir+" && "+line)
}

// journal is the journal of unit in the container.
func (c *container) journal(unit string) string {
	out, _ := c.sh("journalctl", "--no-pager", "-o", "cat", "-u", unit)
	return out
}

// boot makes an overlay of root, lets prepare change it, and boots it.
func boot(t *testing.T, root string, prepare func(dir string)) *container {
	work := t.TempDir()
	merged := filepath.Join(work, "merged")
	for _, d := range []string{"upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := "lowerdir=" + root + ",upperdir=" + filepath.Join(work, "upper") + ",workdir=" + filepath.Join(work, "work")
	if err := syscall.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		harness.Missing(t, "cannot mount an overlay of the root file system (%v): systemd-nspawn has nothing to boot", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(merged, syscall.MNT_DETACH) })
	prepare(merged)

	logPath := filepath.Join(work, "console.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("termd-test-%d", os.Getpid())
	cmd := exec.Command("systemd-nspawn", "-q", "-D", merged, "-b", "--register=no", "--keep-unit",
		"--console=pipe", "--private-network", "--machine="+name, "--system-call-filter="+landlockFilter)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		harness.Missing(t, "systemd-nspawn cannot start: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited); logf.Close() }()
	t.Cleanup(func() {
		// nspawn shuts the container down on the first signal and gives up
		// waiting on the second.
		for i := 0; i < 2; i++ {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
				return
			case <-time.After(15 * time.Second):
			}
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	c := &container{t: t, root: merged}
	for c.pid == 0 {
		select {
		case <-exited:
			log, _ := os.ReadFile(logPath)
			harness.Missing(t, "systemd-nspawn could not boot the container:\n%s", tail(string(log), 3000))
		case <-time.After(50 * time.Millisecond):
		}
		c.pid = childNamed(cmd.Process.Pid, "systemd")
	}
	// Until systemd has its bus up, systemctl cannot ask it anything.
	var state string
	for deadline := time.Now().Add(2 * time.Minute); ; {
		state, _ = c.sh("systemctl", "is-system-running", "--wait")
		state = strings.TrimSpace(state)
		if (state != "offline" && !strings.Contains(state, "Failed to connect to bus")) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("booted in %s: %s", time.Since(start).Round(10*time.Millisecond), state)
	if state != "running" {
		failed, _ := c.sh("systemctl", "--failed", "--no-pager")
		t.Logf("units that failed at boot:\n%s", failed)
		if state != "degraded" {
			log, _ := os.ReadFile(logPath)
			harness.Missing(t, "the container's systemd did not come up (%q):\n%s", state, tail(string(log), 3000))
		}
	}
	return c
}

// childNamed is the pid of a child of parent whose command is name (0: none yet).
func childNamed(parent int, name string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		j := strings.IndexByte(s, '(')
		if i < 0 || j < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(parent) && s[j+1:i] == name {
			return pid
		}
	}
	return 0
}

// TestSystemdNspawnShippedUnits boots a minimal Debian with systemd under
// systemd-nspawn, installs termd with scripts/install.sh as an operator
// would, and checks the shipped units through the real systemd: socket
// activation and the socket's mode, group and directory; a command under
// full enforcement; reload with a new policy and with a broken config;
// restart during an execution; the per-user units; the gateway unit; and
// what doctor, the log and the status say when a seccomp filter refuses
// Landlock.
func TestSystemdNspawnShippedUnits(t *testing.T) {
	if os.Geteuid() != 0 {
		harness.Missing(t, "systemd-nspawn needs root to boot a container")
	}
	for _, p := range []string{"systemd-nspawn", "debootstrap", "nsenter", "curl"} {
		if _, err := exec.LookPath(p); err != nil {
			harness.Missing(t, "%s is not installed (apt-get install systemd-container debootstrap util-linux curl; ./scripts/ci-deps.sh does)", p)
		}
	}
	t0 := time.Now()
	root := cachedRootfs(t)
	tRootfs := time.Since(t0)

	bin := t.TempDir()
	for _, b := range []string{"termd", "termd-launch", "termctl", "termd-mcp", "termd-gateway"} {
		if err := os.Symlink(harness.Bin(t, b), filepath.Join(bin, b)); err != nil {
			t.Fatal(err)
		}
	}
	t1 := time.Now()
	c := boot(t, root, func(dir string) { installShippedUnits(t, dir, bin) })
	tBoot := time.Since(t1)
	t2 := time.Now()
	const ws = "/home/alice/ws"
	cfgPath := "/usr/local/etc/termd/termd.yaml"
	polPath := "/usr/local/etc/termd/policy.yaml"

	t.Run("socket activation", func(t *testing.T) { checkSocketActivation(t, c, ws) })

	var firstReceipt string
	t.Run("command under full enforcement", func(t *testing.T) { checkFullEnforcement(t, c, ws, cfgPath, &firstReceipt) })

	t.Run("reload", func(t *testing.T) { checkReload(t, c, ws, cfgPath, polPath, firstReceipt) })

	t.Run("restart during an execution", func(t *testing.T) { checkRestartDuringExecution(t, c, ws) })

	t.Run("per-user units", func(t *testing.T) { checkPerUserUnits(t, c) })

	t.Run("gateway", func(t *testing.T) { checkGatewayUnit(t, c) })

	t.Run("Landlock refused by a seccomp filter", func(t *testing.T) { checkLandlockRefused(t, c, cfgPath) })
	c.t = t
	t.Logf("time: root file system %s, boot %s, checks %s", tRootfs.Round(10*time.Millisecond), tBoot.Round(10*time.Millisecond), time.Since(t2).Round(10*time.Millisecond))
}

// installShippedUnits installs termd's binaries (symlinks in bin) and units
// into the root file system dir, with a termd group, the gateway's user, an
// agent (alice) and a lingering user (bob), each with a workspace.
func installShippedUnits(t *testing.T, dir, bin string) {
	runInstall(t, []string{"DESTDIR=" + dir}, "/usr/local", bin)
	chroot := func(argv ...string) {
		if out, err := exec.Command("chroot", append([]string{dir}, argv...)...).CombinedOutput(); err != nil {
			t.Fatalf("chroot %v: %v\n%s", argv, err, out)
		}
	}
	chroot("groupadd", "--system", "termd")
	chroot("useradd", "--system", "--user-group", "--home-dir", "/var/lib/termd-gateway", "--shell", "/usr/sbin/nologin", "termd-gateway")
	chroot("useradd", "-m", "-G", "termd", "alice")
	chroot("useradd", "-m", "bob")
	chroot("systemctl", "enable", "termd.socket", "termd-operator.socket")
	// loginctl enable-linger bob, offline.
	if err := os.MkdirAll(filepath.Join(dir, "var/lib/systemd/linger"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "var/lib/systemd/linger/bob"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "usr/local/etc/termd/termd.yaml")
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, "\nroles:\n  agents:\n    users: [alice]\n  operators:\n    users: [termd-gateway]\nshutdown_grace: 1s\n")
	f.Close()
	for _, ws := range []string{"home/alice/ws", "home/bob/ws"} {
		if err := os.MkdirAll(filepath.Join(dir, ws), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ws, "f.txt"), []byte("hello from "+ws+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	chroot("chown", "-R", "alice:alice", "/home/alice/ws")
	chroot("chown", "-R", "bob:bob", "/home/bob/ws")
}

// checkSocketActivation: termd starts on the first connection, and the
// socket and its directory keep their documented modes when it does.
func checkSocketActivation(t *testing.T, c *container, ws string) {
	c.t = t
	if out, _ := c.sh("systemctl", "is-active", "termd.service"); strings.TrimSpace(out) != "inactive" {
		t.Fatalf("termd.service is %q before the first connection, want inactive", strings.TrimSpace(out))
	}
	// As documented: socket 0660 root:termd in a directory 0750 root:termd.
	checkModes := func(when string) {
		out := c.must("stat", "-c", "%a %U:%G %n", "/run/termd", "/run/termd/termd.sock")
		want := "750 root:termd /run/termd\n660 root:termd /run/termd/termd.sock\n"
		if out != want {
			t.Errorf("%s: modes\n%s\nwant\n%s", when, out, want)
		}
	}
	checkModes("before termd started")
	out, code := c.as("alice", ws, "termctl status")
	if code != 0 {
		t.Fatalf("termctl status as alice (group termd, role agent): exit %d\n%s\n%s", code, out, c.journal("termd.service"))
	}
	if out, _ := c.sh("systemctl", "is-active", "termd.service"); strings.TrimSpace(out) != "active" {
		t.Errorf("termd.service is %q after the first connection, want active", strings.TrimSpace(out))
	}
	// systemd must not hand the directory back to root:root when the
	// service starts (RuntimeDirectory= did, and the group lost the socket).
	checkModes("after termd started")
	if out, code := c.as("alice", ws, "termctl status"); code != 0 {
		t.Errorf("second termctl status as alice: exit %d\n%s", code, out)
	}
}

// checkFullEnforcement runs a command as alice under full enforcement, in
// its own cgroup, and sets firstReceipt to its receipt's id.
func checkFullEnforcement(t *testing.T, c *container, ws, cfgPath string, firstReceipt *string) {
	c.t = t
	st := c.must("termctl", "status")
	if !strings.Contains(st, "sandbox:     full enforcement") {
		t.Errorf("status does not say full enforcement:\n%s", st)
	}
	doctor, _ := c.sh("systemd-run", "--wait", "--pipe", "-q", "-p", "Delegate=yes", "/usr/local/bin/termd", "doctor", "--config", cfgPath)
	t.Logf("termd doctor in a unit with Delegate=yes:\n%s", doctor)
	out, code := c.as("alice", ws, "termctl run -o json -- cat f.txt")
	if code != 0 {
		t.Fatalf("termctl run -- cat f.txt: exit %d\n%s\njournal:\n%s", code, out, c.journal("termd.service"))
	}
	var res struct {
		Stdout    string `json:"stdout"`
		ReceiptID string `json:"receipt_id"`
		Execution struct {
			Cgroup bool `json:"cgroup"`
		} `json:"execution"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &res); err != nil {
		t.Fatalf("termctl run -o json: %v\n%s", err, out)
	}
	if res.Stdout != "hello from home/alice/ws\n" || !res.Execution.Cgroup {
		t.Errorf("run: stdout %q, own cgroup %t; want the file and a cgroup\n%s", res.Stdout, res.Execution.Cgroup, out)
	}
	*firstReceipt = res.ReceiptID
	rec := c.must("termctl", "receipts", "show", res.ReceiptID, "-o", "json")
	var r struct {
		Sandbox struct {
			Level, Mode string
		} `json:"sandbox"`
	}
	if err := json.Unmarshal([]byte(rec), &r); err != nil {
		t.Fatalf("receipt: %v\n%s", err, rec)
	}
	if r.Sandbox.Level != "full" || r.Sandbox.Mode != "required" {
		t.Errorf("receipt sandbox %+v, want full under required\n%s", r.Sandbox, rec)
	}
	if j := c.journal("termd.service"); strings.Contains(j, "read-only file system") {
		t.Errorf("the journal shows cgroup EROFS:\n%s", j)
	}
}

// checkReload: systemctl reload applies a new policy keeping the receipts,
// and refuses a broken config, keeping the old one and saying why.
func checkReload(t *testing.T, c *container, ws, cfgPath, polPath, firstReceipt string) {
	c.t = t
	// systemctl reload returns once SIGHUP is sent (ExecReload);
	// termd reloads a moment later and logs msg: wait for that line.
	reload := func(msg string) {
		n := strings.Count(c.journal("termd.service"), `msg="`+msg)
		c.must("systemctl", "reload", "termd")
		for strings.Count(c.journal("termd.service"), `msg="`+msg) == n {
			time.Sleep(20 * time.Millisecond)
		}
	}
	before := c.must("termctl", "receipts", "list")
	// A new policy: cat denied.
	c.must("sed", "-i", "s/{id: read.cat, program: cat, decision: allow/{id: read.cat, program: cat, decision: deny/", polPath)
	reload("policy reloaded")
	if out, code := c.as("alice", ws, "termctl policy check -- cat f.txt"); code != 4 {
		t.Errorf("after reload with cat denied: policy check exit %d, want 4 (denied)\n%s", code, out)
	}
	if out, code := c.as("alice", ws, "termctl run -- cat f.txt"); code != 125 || strings.Contains(out, "hello") {
		t.Errorf("after reload with cat denied: run exit %d, want 125 and nothing run\n%s", code, out)
	}
	after := c.must("termctl", "receipts", "list")
	if !strings.Contains(after, firstReceipt) || len(after) < len(before) {
		t.Errorf("receipts lost over the reload:\nbefore\n%s\nafter\n%s", before, after)
	}
	c.must("sed", "-i", "s/{id: read.cat, program: cat, decision: deny/{id: read.cat, program: cat, decision: allow/", polPath)
	reload("policy reloaded")

	// A broken config: the old one stays, the journal says why.
	good := c.must("cat", cfgPath)
	c.must("sh", "-c", "printf 'roles: [unclosed\\n' >> "+cfgPath)
	reload("config reload refused")
	if out, code := c.as("alice", ws, "termctl run -- cat f.txt"); code != 0 || !strings.Contains(out, "hello") {
		t.Errorf("after a broken config's reload alice lost her role or cat its rule: exit %d\n%s", code, out)
	}
	j := c.journal("termd.service")
	if !strings.Contains(j, "termd.yaml") || !strings.Contains(strings.ToLower(j), "reload") {
		t.Errorf("the journal does not say why the reload was refused:\n%s", tail(j, 3000))
	}
	t.Logf("journal on the broken config:\n%s", lastLines(j, 3))
	c.must("sh", "-c", "cat > "+cfgPath+" <<'EOF'\n"+good+"EOF")
	reload("config reloaded")
}

// checkRestartDuringExecution: a restart ends a running command with a
// cancelled receipt, and the chain still verifies.
func checkRestartDuringExecution(t *testing.T, c *container, ws string) {
	c.t = t
	out, code := c.as("alice", ws, "termctl run --detach -- sleep 1")
	if code != 0 {
		t.Fatalf("run --detach sleep: exit %d\n%s", code, out)
	}
	// sleep 1 is the rule's example; a longer one is the same rule.
	out, code = c.as("alice", ws, "termctl run --detach -- sleep 300")
	if code != 0 {
		t.Fatalf("run --detach sleep 300: exit %d\n%s", code, out)
	}
	ps := c.must("termctl", "ps")
	if !strings.Contains(ps, "sleep 300") {
		t.Fatalf("sleep 300 is not running:\n%s", ps)
	}
	c.must("systemctl", "restart", "termd")
	if out, code := c.as("alice", ws, "termctl status"); code != 0 {
		t.Fatalf("the socket does not accept after the restart: exit %d\n%s", code, out)
	}
	list := c.must("termctl", "receipts", "list")
	found := false
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, "sleep 300") {
			found = true
			if !strings.Contains(line, "cancelled") {
				t.Errorf("sleep 300's receipt is not cancelled: %s", line)
			}
		}
	}
	if !found {
		t.Errorf("no receipt for the execution the restart ended:\n%s", list)
	}
	if out, code := c.sh("termctl", "audit", "verify"); code != 0 {
		t.Errorf("termctl audit verify after the restart: exit %d\n%s", code, out)
	} else {
		t.Logf("audit verify: %s", strings.TrimSpace(out))
	}
}

// checkPerUserUnits: a lingering user's own termd, socket-activated by
// the per-user units, runs his commands.
func checkPerUserUnits(t *testing.T, c *container) {
	c.t = t
	uid := strings.TrimSpace(c.must("id", "-u", "bob"))
	rt := "/run/user/" + uid
	// The lingering user's manager (user@UID.service) starts at boot.
	if out, code := c.sh("systemctl", "is-active", "user@"+uid+".service"); code != 0 {
		t.Skipf("the container starts no user manager for a lingering user (user@%s.service: %s): the per-user units cannot be checked here; its journal:\n%s", uid, strings.TrimSpace(out), c.journal("user@"+uid+".service"))
	}
	env := "XDG_RUNTIME_DIR=" + rt + " DBUS_SESSION_BUS_ADDRESS=unix:path=" + rt + "/bus"
	for _, line := range []string{
		"systemctl --user daemon-reload",
		"systemctl --user enable --now termd.socket",
	} {
		if out, code := c.as("bob", "/home/bob", "env "+env+" "+line); code != 0 {
			t.Fatalf("%s: exit %d\n%s", line, code, out)
		}
	}
	out, code := c.as("bob", "/home/bob/ws", "env "+env+" termctl status")
	if code != 0 {
		j, _ := c.sh("journalctl", "--no-pager", "-o", "cat", "_UID="+uid)
		t.Fatalf("termctl status against bob's own termd: exit %d\n%s\n%s", code, out, tail(j, 3000))
	}
	t.Logf("bob's termd:\n%s", out)
	if !strings.Contains(out, rt+"/termd/termd.sock") {
		t.Errorf("bob's termctl did not use his own socket:\n%s", out)
	}
	run, code := c.as("bob", "/home/bob/ws", "env "+env+" termctl run -- cat f.txt")
	if code != 0 || !strings.Contains(run, "hello from home/bob/ws") {
		t.Errorf("cat through bob's own termd: exit %d\n%s", code, run)
	}
}

// checkGatewayUnit: the gateway's unit serves the console, refuses a
// request without its token and answers one with it.
func checkGatewayUnit(t *testing.T, c *container) {
	c.t = t
	c.must("systemctl", "start", "termd-gateway.service")
	var token string
	for i := 0; token == "" && i < 200; i++ {
		tok, _ := c.sh("cat", "/var/lib/termd-gateway/gateway.token")
		if !strings.Contains(tok, "No such file") {
			token = strings.TrimSpace(tok)
		}
		if token == "" {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if token == "" {
		t.Fatalf("the gateway wrote no token:\n%s", c.journal("termd-gateway.service"))
	}
	curl := func(args ...string) (string, int) {
		// curl from the host in the container's network namespace,
		// again while the gateway is not listening yet (exit 7).
		for i := 0; ; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(c.pid), "-n", "--", "curl", "-s", "-w", "\n%{http_code}"}, args...)...)
			out, err := cmd.Output()
			cancel()
			if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 7 && i < 200 {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if err != nil {
				t.Fatalf("curl %v: %v\n%s", args, err, out)
			}
			s := string(out)
			nl := strings.LastIndexByte(s, '\n')
			n, _ := strconv.Atoi(s[nl+1:])
			return s[:nl], n
		}
	}
	page, code := curl("http://127.0.0.1:8765/")
	if code != 200 || !strings.Contains(page, "<html") {
		t.Errorf("console page: HTTP %d\n%s", code, tail(page, 500))
	}
	if _, code := curl("http://127.0.0.1:8765/v1/status"); code != 401 {
		t.Errorf("status without the token: HTTP %d, want 401", code)
	}
	body, code := curl("-H", "Authorization: Bearer "+token, "http://127.0.0.1:8765/v1/status")
	if code != 200 || !strings.Contains(body, "full enforcement") || !strings.Contains(body, "token:console") {
		t.Errorf("status with the gateway's token: HTTP %d\n%s\n%s", code, body, c.journal("termd-gateway.service"))
	}
}

// checkLandlockRefused: under a seccomp filter refusing Landlock, doctor
// fails saying so and how to allow it, and so do termd's status and log.
func checkLandlockRefused(t *testing.T, c *container, cfgPath string) {
	c.t = t
	filter := []string{"-p", "SystemCallFilter=~landlock_create_ruleset landlock_add_rule landlock_restrict_self", "-p", "SystemCallErrorNumber=EPERM"}
	doctor, code := c.sh(append(append([]string{"systemd-run", "--wait", "--pipe", "-q"}, filter...), "/usr/local/bin/termd", "doctor", "--config", cfgPath)...)
	t.Logf("doctor under a filter refusing Landlock (exit %d):\n%s", code, doctor)
	if code == 0 || !strings.Contains(doctor, "FAIL") || !strings.Contains(doctor, "refuses its system calls") ||
		!strings.Contains(doctor, "--system-call-filter=") || !strings.Contains(doctor, "--security-opt seccomp=") {
		t.Errorf("doctor does not fail saying Landlock is refused and how to allow it (exit %d)", code)
	}
	// A termd started under that filter: its log and its status (the
	// console shows status' sandbox detail as a banner).
	c.must(append(append([]string{"systemd-run", "--unit=termd-refused", "-p", "Delegate=yes"}, filter...),
		"/usr/local/bin/termd", "--config", cfgPath, "--socket", "/run/termd-refused/termd.sock", "--state-dir", "/var/lib/termd-refused")...)
	var st string
	for i := 0; i < 200; i++ {
		var code int
		if st, code = c.sh("termctl", "--socket", "/run/termd-refused/termd.sock", "status"); code == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(st, "refuses its system calls") || !strings.Contains(st, "--system-call-filter=") {
		t.Errorf("status (the console's banner) does not say Landlock is refused and how to allow it:\n%s", st)
	}
	j := c.journal("termd-refused.service")
	if !strings.Contains(j, "refuses its system calls") || !strings.Contains(j, "level=ERROR") {
		t.Errorf("the start-up log does not say Landlock is refused, as an error:\n%s", tail(j, 2000))
	}
	c.sh("systemctl", "stop", "termd-refused")
}

func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
