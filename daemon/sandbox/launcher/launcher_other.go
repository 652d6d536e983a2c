//go:build !linux

package launcher

import (
	"fmt"
	"os"
)

// Main is termd-launch's main; only Linux uses a launcher (macOS runs
// commands through sandbox-exec).
func Main() int {
	fmt.Fprintln(os.Stderr, "termd-launch is only used on Linux")
	return 2
}
