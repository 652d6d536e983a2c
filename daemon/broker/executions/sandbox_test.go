package executions_test

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/termd/termd/daemon/broker/executions"
	"github.com/termd/termd/daemon/config"
	"github.com/termd/termd/daemon/sandbox"
)

// Every execution is kept from termd's own files (state, socket and its
// directory, config, policy, adviser key, credential files, configured
// secrets) and, when termd is root, from the host's secrets; a host secret
// that holds a workspace or the command homes stays reachable.
func TestHiddenPathsCoverTermdAndHostSecrets(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.StateDir, cfg.Socket = filepath.Join(dir, "state"), filepath.Join(dir, "run", "termd.sock")
	cfg.Source, cfg.Policy = filepath.Join(dir, "config.yaml"), filepath.Join(dir, "policy.yaml")
	cfg.Adviser.APIKeyFile, cfg.CredentialsFile = filepath.Join(dir, "adviser.key"), filepath.Join(dir, "credentials.yaml")
	cfg.Secrets = []string{filepath.Join(dir, "vault")}
	cfg.Credentials = []config.Credential{{Name: "TOKEN", File: filepath.Join(dir, "token")}}
	cfg.Workspaces = []string{filepath.Join(dir, "ws")}
	h := executions.HiddenPaths(cfg, filepath.Join(dir, "state-home"))
	for _, want := range []string{cfg.StateDir, cfg.Socket, filepath.Dir(cfg.Socket), cfg.Source, cfg.Policy, cfg.Adviser.APIKeyFile, cfg.CredentialsFile, cfg.Secrets[0], cfg.Credentials[0].File} {
		if !slices.Contains(h, want) {
			t.Errorf("%s is not hidden: %v", want, h)
		}
	}
	if os.Geteuid() != 0 {
		return
	}
	for _, want := range []string{"/etc/shadow", "/etc/gshadow", "/root"} {
		if !slices.Contains(h, want) {
			t.Errorf("the host secret %s is not hidden: %v", want, h)
		}
	}
	cfg.Workspaces = []string{"/root/project"}
	if h := executions.HiddenPaths(cfg, filepath.Join(dir, "state-home")); slices.Contains(h, "/root") || !slices.Contains(h, "/etc/shadow") {
		t.Errorf("with a workspace under /root: %v", h)
	}
	if h := executions.HiddenPaths(cfg, "/root/.termd-home"); slices.Contains(h, "/root") {
		t.Errorf("with the command homes under /root: %v", h)
	}
}

// A command run for root holds an unprivileged host uid (the configured
// one, or the default) unless its plan is privileged; a command run as
// anyone else keeps its uid (invariant 12).
func TestRootMapHoldsNoHostRoot(t *testing.T) {
	cfg := config.Default()
	if m := executions.RootMap(cfg, 1000, false); m != 0 {
		t.Errorf("uid 1000 mapped to %d", m)
	}
	if m := executions.RootMap(cfg, 0, true); m != 0 {
		t.Errorf("a privileged root run mapped to %d", m)
	}
	want := uint32(0)
	if os.Geteuid() == 0 && runtime.GOOS == "linux" {
		want = sandbox.DefaultRootMapUID
	}
	if m := executions.RootMap(cfg, 0, false); m != want {
		t.Errorf("a root run maps to %d, want %d", m, want)
	}
	cfg.RootMapUID = 70000
	if m := executions.RootMap(cfg, 0, false); want != 0 && m != 70000 {
		t.Errorf("with root_map_uid 70000, a root run maps to %d", m)
	}
}
