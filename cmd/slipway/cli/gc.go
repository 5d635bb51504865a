package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
)

// NewCmdGC lists (and with --delete deletes) artifacts past every window.
func NewCmdGC(g *globals) *cobra.Command {
	var (
		rf    repoFlags
		pools []string
		del   bool
	)
	cmd := &cobra.Command{
		Use:   "gc --repo URL [--pool P]... [--delete]",
		Short: "List (with --delete, delete) the images of retained generations past their rollback and restore windows",
		Long: `gc looks at every pool of the config repository. An image is a candidate only when
its generation is retained and both its rollback and restore windows have closed, and no
other generation of any pool pins it (active, warming, draining, retained within its
windows, a target, or never rolled out). It is a dry run unless --delete: then each image
is deleted with its signatures and attestations, and the generations leave their pool's
state in one commit (their documents stay). Exit 0 done, 1 refused, 2 usage or I/O.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rf.repo == "" {
				return usage(errors.New("--repo is required"))
			}
			if rf.pool != "" {
				pools = append(pools, rf.pool)
			}
			repo, err := gitops.Open(cmd.Context(), rf.repo, rf.options()...)
			if err != nil {
				return usage(err)
			}
			rep, err := rollout.GC(cmd.Context(), rollout.GCOptions{Repo: repo, Branch: rf.branch, Pools: pools, Delete: del})
			if err != nil {
				if errors.Is(err, rollout.ErrRefused) || errors.Is(err, gitops.ErrConflict) {
					return failed(err)
				}
				return usage(err)
			}
			if g.json() {
				return g.printJSON(rep)
			}
			verb := "would delete"
			if del {
				verb = "deleted"
			}
			for _, a := range rep.Artifacts {
				fmt.Fprintf(g.stdout, "%s %s %s %s (windows closed %s)\n", verb, a.Generation, a.Kind, a.Image, a.WindowsClosed.Format("2006-01-02T15:04:05Z07:00"))
			}
			for _, k := range rep.Kept {
				fmt.Fprintf(g.stdout, "kept %s: %s\n", k.Generation, k.Reason)
			}
			if len(rep.Artifacts) == 0 {
				fmt.Fprintln(g.stdout, "nothing past every window")
			}
			if rep.Commit != "" {
				fmt.Fprintf(g.stdout, "committed %s: %d generations left their pool's state\n", rep.Commit, len(rep.Removed))
			}
			return nil
		},
	}
	rf.add(cmd)
	cmd.Flags().StringSliceVar(&pools, "pools", nil, "more pools (default: every pool)")
	cmd.Flags().BoolVar(&del, "delete", false, "delete (default: a dry run that lists)")
	return cmd
}
