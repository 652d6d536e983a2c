package sandbox_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/sandbox"
	"github.com/termd/termd/internal/program"
)

// BenchmarkPrepare is the sandbox of one execution of pwd as termd builds it
// in Execute's check stage (read-only and workspace-write profiles): the
// Landlock ruleset from descriptors opened now, the seccomp program, the
// hidden and read-only mounts. cpu-ns/op is the process's CPU per execution.
func BenchmarkPrepare(b *testing.B) {
	sup := host(b)
	base := b.TempDir()
	ws, state := filepath.Join(base, "work"), filepath.Join(base, "state")
	for _, d := range []string{filepath.Join(ws, ".git", "hooks"), state, filepath.Join(base, "run"), filepath.Join(base, "home"), filepath.Join(base, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	paths := sandbox.Paths{
		Workspaces: []string{ws},
		SystemRead: []string{"/usr", "/etc", "/opt", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"},
		Home:       filepath.Join(base, "home"),
		Tmp:        filepath.Join(base, "tmp"),
		Cwd:        ws,
		Hidden: []string{state, filepath.Join(base, "run", "termd.sock"), filepath.Join(base, "termd.yaml"), filepath.Join(base, "policy.yaml"),
			filepath.Join(base, "run"), "/etc/shadow", "/etc/gshadow", "/root", filepath.Join(base, "run", "termd-operator.sock")},
		ProtectedNames: []string{".bashrc", ".envrc"},
		ProtectedDirs:  []string{".vscode"},
	}
	for _, profile := range []string{domain.ReadOnly, domain.WorkspaceWrite} {
		b.Run(profile, func(b *testing.B) {
			p := domain.Profile{Profile: profile, NetworkMode: "none", Exec: program.Exec("/usr/bin/pwd")}
			b.ReportAllocs()
			start := cpuTime()
			for i := 0; i < b.N; i++ {
				l, _, err := sandbox.Prepare(p, paths, sandbox.Required, sup)
				if err != nil {
					b.Fatal(err)
				}
				l.Close()
			}
			b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's CPU time (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
