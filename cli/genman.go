package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newGenMan writes man pages for every command (`make man`); hidden because
// people read the pages, they do not make them.
func newGenMan(a *app) *cobra.Command {
	return &cobra.Command{
		Use:    "gen-man DIR",
		Short:  "Write termctl's man pages into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true
			hdr := &doc.GenManHeader{Title: "TERMCTL", Section: "1", Source: "termd", Manual: "termd manual"}
			if err := doc.GenManTree(root, hdr, args[0]); err != nil {
				return fmt.Errorf("writing man pages to %s: %w", args[0], err)
			}
			_, err := fmt.Fprintf(a.stdout, "man pages written to %s\n", args[0])
			return err
		},
	}
}
