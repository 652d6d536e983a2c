package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/internal/harness"
)

// TERMD_CGROUP_REUSE takes 0 (no reuse of ended executions' cgroups) or
// nothing else: another value refuses to start, naming the variable and
// what to set, before any socket exists.
func TestBadCgroupReuseSettingRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	cmd := exec.Command(harness.Bin(t, "termd"), "--socket", sock, "--state-dir", filepath.Join(dir, "state"), "--workspace", dir)
	cmd.Env = append(os.Environ(), "TERMD_CGROUP_REUSE=no")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		select {
		case err := <-exited:
			if err == nil || !strings.Contains(out.String(), `TERMD_CGROUP_REUSE="no"`) || !strings.Contains(out.String(), "set it to 0") {
				t.Fatalf("want a refusal naming TERMD_CGROUP_REUSE and what to set; got err=%v\n%s", err, out.String())
			}
			return
		default:
		}
		if _, err := os.Stat(sock); err == nil {
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("termd started with TERMD_CGROUP_REUSE=no; output:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
