// Command gen writes the man pages of termd's binaries into a directory:
// go run ./internal/manpages/gen DIR (`make man`).
package main

import (
	"fmt"
	"os"

	"github.com/termd/termd/internal/manpages"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./internal/manpages/gen DIR")
		os.Exit(2)
	}
	if err := manpages.Write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	fmt.Println("man pages written to", os.Args[1])
}
