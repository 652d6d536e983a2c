package launcher

import (
	"fmt"
	"os"
)

// Main is termd-launch's Go main. On Linux the work is done by C code that
// runs before the Go runtime starts (cmd/termd-launch/launch.c) and never
// returns when termd started it, so reaching this means the binary was run
// by hand, or was built without cgo and cannot confine anything.
func Main() int {
	if os.Args[0] == ArgvZero && (len(os.Args) == 1 || len(os.Args) == 2 && os.Args[1] == Pooled) {
		msg := "termd-launch was built without cgo, so it cannot confine commands: rebuild it with a C compiler (CGO_ENABLED=1), or set sandbox: off"
		if f := os.NewFile(ReportFD, "report"); f != nil {
			_, _ = f.WriteString(msg)
		} else {
			fmt.Fprintln(os.Stderr, msg)
		}
		return ExitConfine
	}
	fmt.Fprintln(os.Stderr, "termd-launch is started by termd for each execution to confine it; it is not a command to run by hand")
	return 2
}
