package cmd_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/termd/termd/internal/harness"
)

// The four binaries share one command-line behaviour: cobra's --help on
// stdout with exit 0, --version as "NAME VERSION", and a bad flag as one
// line "NAME: ..." on stderr with exit 2.
func TestBinariesShareOneCommandLine(t *testing.T) {
	for _, bin := range []string{"termd", "termctl", "termd-mcp", "termd-gateway"} {
		t.Run(bin, func(t *testing.T) {
			path := harness.Bin(t, bin)
			run := func(args ...string) (string, string, int) {
				cmd := exec.Command(path, args...)
				cmd.Env = []string{"PATH=/usr/bin:/bin", "TERMD_SOCKET=/nonexistent/termd.sock", "NO_COLOR=1"}
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				err := cmd.Run()
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				return out.String(), errb.String(), code
			}
			out, _, code := run("--help")
			if code != 0 || !strings.Contains(out, "Usage:\n  "+bin) || !strings.Contains(out, "-h, --help") || !strings.Contains(out, "--socket") {
				t.Errorf("--help: exit %d, stdout:\n%s", code, out)
			}
			out, _, code = run("--version")
			if code != 0 || !strings.HasPrefix(out, bin+" ") {
				t.Errorf("--version: exit %d, stdout %q; want %q", code, out, bin+" VERSION")
			}
			_, errOut, code := run("--no-such-flag")
			if code != 2 || !strings.HasPrefix(errOut, bin+": unknown flag: --no-such-flag") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
				t.Errorf("a bad flag: exit %d, stderr %q; want exit 2 and one line %q", code, errOut, bin+": unknown flag: --no-such-flag ...")
			}
		})
	}
}
