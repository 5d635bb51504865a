package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/internal/version"
)

// NewCmdVersion prints the version.
func NewCmdVersion(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the slipway version, commit, dirty flag and Go version",
		Long: `Version prints the release tag the binary was built from (stamped by make release), or, for an
untagged build, v0.0.0-<commit12>[-dirty] from the VCS stamp Go embeds, saying "untagged".`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return printVersion(g)
		},
	}
}

// printVersion is what both `slipway version` and `slipway --version` print:
// "slipway VERSION (notes)", the first two words being what an installer checks.
func printVersion(g *globals) error {
	v := version.Get()
	if g.json() {
		return g.printJSON(v)
	}
	_, err := fmt.Fprintf(g.stdout, "slipway %s\n", v)
	return err
}
