// Command termctl is the termd command line for people and scripts.
package main

import (
	"os"

	"github.com/termd/termd/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:])) }
