package cli

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/release"
)

func newCmdGenerationList(g *globals) *cobra.Command {
	var rf repoFlags
	cmd := &cobra.Command{
		Use:   "list --repo URL [--pool P]",
		Short: "List the generations in the config repository: id, pool, sequence, state, when promoted, pins",
		Long: `List reads every generation promoted to the pool (to every pool without --pool) at the
head of the branch, newest first: its short id (any unique prefix of 6 or more hex digits
after g- works wherever an id is taken), sequence, its state in the pool (active, warming,
draining, retained, or target when promoted and not rolled out yet), when it was promoted,
and its pins as tag@digest.`,
		Example: `  slipway generation list --repo ./config.git --pool agents
  slipway generation list --repo ./config.git -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rf.repo == "" {
				return usage(errors.New("--repo is required"))
			}
			l, err := release.ListGenerations(cmd.Context(), rf.repo, rf.branch, rf.pool, rf.options()...)
			if err != nil {
				return usage(err)
			}
			if g.json() {
				return g.printJSON(l)
			}
			if len(l.Generations) == 0 {
				fmt.Fprintln(g.stdout, "no generations")
				return nil
			}
			w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tPOOL\tSEQ\tSTATE\tPROMOTED\tPINS")
			for _, e := range l.Generations {
				var pins []string
				for _, p := range e.Pins {
					pins = append(pins, p.Short())
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", shortID(e.ID), e.Pool, e.Sequence, dash(e.State), when(e.Promoted), strings.Join(pins, ", "))
			}
			return w.Flush()
		},
	}
	rf.add(cmd)
	return cmd
}

// shortID is an id cut to 12 characters after its kind, as git shortens
// commits: enough to type, and any unique prefix is taken back.
func shortID(id string) string {
	kind, rest, ok := strings.Cut(id, "-")
	if !ok || len(rest) <= 12 {
		return id
	}
	return kind + "-" + rest[:12]
}
