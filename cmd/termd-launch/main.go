// Command termd-launch confines one execution between fork and exec (see
// daemon/sandbox/launcher). termd starts it; it is not run by hand.
package main

import (
	"os"

	"github.com/termd/termd/daemon/sandbox/launcher"
)

func main() { os.Exit(launcher.Main()) }
