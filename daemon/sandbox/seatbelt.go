package sandbox

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/termd/termd/daemon/domain"
)

// SeatbeltProfile renders a profile as a macOS Seatbelt (sandbox-exec)
// policy: deny by default, then the same grants as the Linux rules, then
// termd's own files and the protected paths denied again (in Seatbelt the
// last matching rule wins, so the denials come after the grants).
func SeatbeltProfile(p domain.Profile, ps Paths) string {
	var b strings.Builder
	b.WriteString("(version 1)\n(deny default)\n")
	b.WriteString("(allow process-fork)\n(allow signal (target same-sandbox))\n(allow sysctl-read)\n(allow mach-lookup)\n(allow ipc-posix-shm)\n")
	b.WriteString("(allow file-read-metadata)\n")
	sub := func(op string, paths ...string) {
		var parts []string
		for _, x := range paths {
			if x != "" {
				parts = append(parts, fmt.Sprintf("(subpath %s)", sbString(filepath.Clean(x))))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "(%s %s)\n", op, strings.Join(parts, " "))
		}
	}
	lit := func(op string, paths ...string) {
		var parts []string
		for _, x := range paths {
			parts = append(parts, fmt.Sprintf("(literal %s)", sbString(filepath.Clean(x))))
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "(%s %s)\n", op, strings.Join(parts, " "))
		}
	}
	lit("allow file-read* file-write-data", "/dev/null", "/dev/zero", "/dev/tty")
	reads := readSet(p, ps)
	sub("allow file-read*", reads...)
	sub("allow file-read*", ps.Workspaces...)
	sub("allow file-read*", ps.Home)
	sub("allow file-read* file-write*", ps.Tmp)
	lit("allow process-exec", p.Exec...)
	if p.Profile == domain.WorkspaceWrite {
		sub("allow process-exec", reads...)
		sub("allow process-exec", ps.Workspaces...)
		sub("allow process-exec", ps.Tmp)
		sub("allow file-write*", ps.Workspaces...)
		sub("allow file-write*", ps.Home)
		var prot []string
		for _, dir := range protectedDirsToScan(ps) {
			for _, n := range append(append([]string{}, ps.ProtectedNames...), ps.ProtectedDirs...) {
				prot = append(prot, filepath.Join(dir, n))
			}
			prot = append(prot, filepath.Join(dir, ".git", "hooks"), filepath.Join(dir, ".git", "config"), filepath.Join(dir, ".git", "info"), filepath.Join(dir, ".termd"))
		}
		sub("deny file-write*", prot...)
	}
	sub("allow file-read* file-write*", cacheDirs(p, ps)...)
	for _, w := range p.Write {
		sub("allow file-write*", w)
	}
	if p.Network {
		b.WriteString("(allow network*)\n")
	}
	sub("deny file-read* file-write* process-exec", ps.Hidden...)
	return b.String()
}

// sbString quotes a path for a Seatbelt string literal.
func sbString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}
