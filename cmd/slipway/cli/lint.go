package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/release/pin"
)

type lintReport struct {
	Findings []pin.Finding `json:"findings"`
	Skipped  []pin.Skipped `json:"skipped,omitempty"`
}

// NewCmdLint reports mutable image references.
func NewCmdLint(g *globals) *cobra.Command {
	var tf treeFlags
	cmd := &cobra.Command{
		Use:   "lint PATH...",
		Short: "Report every mutable image reference (exit 1 on findings, 0 clean, 2 on errors)",
		Long: `Lint prints one line per mutable image reference: path:line:col: <ref>: <reason>.
Tag-only references are mutable; imagePullPolicy: Always does not fix that, it only asks
for the tag again, which may return different bytes.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tree, err := tf.find(cmd.Context(), g, args)
			if err != nil {
				return err
			}
			findings := pin.Lint(tree)
			if err := g.ci(lintStep(findings)); err != nil {
				return err
			}
			if g.json() {
				if findings == nil {
					findings = []pin.Finding{}
				}
				if err := g.printJSON(lintReport{Findings: findings, Skipped: tree.Skipped}); err != nil {
					return err
				}
			} else {
				for _, f := range findings {
					fmt.Fprintln(g.stdout, f)
				}
			}
			if len(findings) > 0 {
				return silent(exitFailed)
			}
			if !g.json() {
				ph := len(tree.Placeholders())
				fmt.Fprintf(g.stderr, "%d references, all pinned by digest%s\n", len(tree.Sites())-ph, placeholderNote(ph))
			}
			return nil
		},
	}
	tf.add(cmd.Flags())
	return cmd
}
