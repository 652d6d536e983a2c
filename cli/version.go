package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/termd/termd/internal/buildinfo"
)

func newVersion(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print termctl's and the daemon's versions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := map[string]string{"termctl": buildinfo.String(), "api": buildinfo.APIVersion}
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			v, err := c.Version(ctx)
			if err != nil {
				return err
			}
			out["termd"] = v.Version
			if ok, err := a.printData(out); ok {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "termctl %s\ntermd   %s (%s, %s)\n", out["termctl"], v.Version, v.ApiVersion, v.GoVersion)
			return err
		},
	}
}
