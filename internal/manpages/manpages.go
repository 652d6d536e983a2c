// Package manpages writes the man pages of termd's four binaries from their
// cobra command trees (`make man`; `make install` installs them).
package manpages

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/termd/termd/cli"
	"github.com/termd/termd/daemon"
	"github.com/termd/termd/gateway"
	"github.com/termd/termd/mcpbridge"
)

// Roots are the binaries' command trees, by name.
func Roots() []*cobra.Command {
	return []*cobra.Command{
		daemon.NewCommand(daemon.Deps{}),
		cli.NewRoot(io.Discard, io.Discard, nil),
		mcpbridge.NewCommand(io.Discard),
		gateway.NewCommand(io.Discard),
	}
}

// Write writes section-1 pages for every binary and subcommand into dir.
func Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, root := range Roots() {
		root.DisableAutoGenTag = true
		hdr := &doc.GenManHeader{Section: "1", Source: "termd", Manual: "termd manual"}
		if err := doc.GenManTree(root, hdr, dir); err != nil {
			return fmt.Errorf("writing the man pages of %s to %s: %w", root.Name(), dir, err)
		}
	}
	return nil
}
