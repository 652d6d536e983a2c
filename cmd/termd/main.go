// Command termd is the termd daemon.
package main

import (
	"os"

	"github.com/termd/termd/daemon"
)

func main() { os.Exit(daemon.Main()) }
