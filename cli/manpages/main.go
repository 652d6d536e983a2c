// Command manpages writes termctl's man pages into a directory (`make man`).
// It is its own program so that termctl does not link the man-page
// renderer (cobra/doc, go-md2man, blackfriday) and pay for its package
// initialisation at every start.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra/doc"

	"github.com/termd/termd/cli"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./cli/manpages DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "manpages:", err)
		os.Exit(1)
	}
	root := cli.NewRoot(os.Stdout, os.Stderr, os.Stdin)
	root.DisableAutoGenTag = true
	hdr := &doc.GenManHeader{Title: "TERMCTL", Section: "1", Source: "termd", Manual: "termd manual"}
	if err := doc.GenManTree(root, hdr, dir); err != nil {
		fmt.Fprintf(os.Stderr, "manpages: writing man pages to %s: %v\n", dir, err)
		os.Exit(1)
	}
	fmt.Printf("man pages written to %s\n", dir)
}
