package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
)

// gcReport is gc's answer: the images' (with --repo) and the runtime's
// checkpoints' (with --runtime).
type gcReport struct {
	*rollout.GCReport
	Checkpoints *runtimeapi.SweepResult `json:"checkpoints,omitempty"`
}

// NewCmdGC lists (and with --delete deletes) artifacts past every window.
func NewCmdGC(g *globals) *cobra.Command {
	var (
		rf    repoFlags
		rt    checkpointFlags
		pools []string
		del   bool
	)
	cmd := &cobra.Command{
		Use:   "gc [--repo URL [--pool P]...] [--runtime URL --token-file FILE] [--delete]",
		Short: "List (with --delete, delete) the images of retained generations and the checkpoints past their windows",
		Long: `gc looks at every pool of the config repository (--repo). An image is a candidate only when
its generation is retained and both its rollback and restore windows have closed, and no
other generation of any pool pins it (active, warming, draining, retained within its
windows, a target, or never rolled out). It is a dry run unless --delete: then each image
is deleted with its signatures and attestations, and the generations leave their pool's
state in one commit (their documents stay).

With --runtime, gc also sweeps that runtime's checkpoints: one is a candidate only when its
pool's restore window has closed on it (by the runtime's clock) and it is not the head of a
run still open, suspended or not; a checkpoint of a pool the runtime does not know is kept.
With --delete each goes with its attestation and the layers no remaining checkpoint uses.
A runtime that publishes its checkpoints (runtime serve --checkpoint-repository) sweeps that
repository first by the same rule: each checkpoint there goes with its signature and
attestation (the registry's own garbage collection removes the layers); one whose signature
does not verify with the runtime's key is left alone and listed.
Exit 0 done, 1 refused, 2 usage or I/O.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rf.repo == "" && rt.server == "" {
				return usage(errors.New("--repo or --runtime is required"))
			}
			if rf.pool != "" {
				pools = append(pools, rf.pool)
			}
			if len(pools) > 0 && rf.repo == "" {
				return usage(errors.New("--pool and --pools choose the config repository's pools: they need --repo"))
			}
			var c *runtimeapi.Client
			if rt.server != "" {
				var err error
				if c, _, err = rt.client(false); err != nil {
					return err
				}
			}
			var out gcReport
			if rf.repo != "" {
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
				out.GCReport = rep
			}
			if c != nil {
				sw, err := c.SweepCheckpoints(cmd.Context(), runtimeapi.SweepBody{DryRun: !del})
				if err != nil {
					return failed(fmt.Errorf("sweep the checkpoints of runtime %s: %w", rt.server, err))
				}
				out.Checkpoints = sw
			}
			if g.json() {
				return g.printJSON(out)
			}
			printGC(g, out, del)
			return nil
		},
	}
	rf.add(cmd)
	rt.add(cmd, false)
	cmd.Flags().StringSliceVar(&pools, "pools", nil, "more pools (default: every pool)")
	cmd.Flags().BoolVar(&del, "delete", false, "delete (default: a dry run that lists)")
	return cmd
}

// printGC writes gc's answer as lines.
func printGC(g *globals, out gcReport, del bool) {
	const at = "2006-01-02T15:04:05Z07:00"
	verb := "would delete"
	if del {
		verb = "deleted"
	}
	if rep := out.GCReport; rep != nil {
		for _, a := range rep.Artifacts {
			fmt.Fprintf(g.stdout, "%s %s %s %s (windows closed %s)\n", verb, a.Generation, a.Kind, a.Image, a.WindowsClosed.Format(at))
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
	}
	if sw := out.Checkpoints; sw != nil {
		for _, d := range sw.Deleted {
			fmt.Fprintf(g.stdout, "%s checkpoint %s of run %s (pool %s, taken %s, restore window closed %s)\n",
				verb, d.Checkpoint, d.RunID, d.Pool, d.Created.Format(at), d.WindowClosed.Format(at))
		}
		fmt.Fprintf(g.stdout, "kept %d checkpoints (inside their pool's restore window, a run's head, or of a pool the runtime does not know)\n", sw.Kept)
		if sw.Blobs > 0 {
			fmt.Fprintf(g.stdout, "%s %d blobs no remaining checkpoint uses (%d bytes)\n", verb, sw.Blobs, sw.Bytes)
		}
		if sw.Repository != "" {
			for _, d := range sw.Published {
				fmt.Fprintf(g.stdout, "%s published checkpoint %s of run %s (pool %s, taken %s, restore window closed %s) with its signature and attestation\n",
					verb, d.Checkpoint, d.RunID, d.Pool, d.Created.Format(at), d.WindowClosed.Format(at))
			}
			fmt.Fprintf(g.stdout, "kept %d published checkpoints in %s\n", sw.PublishedKept, sw.Repository)
			for _, u := range sw.Unjudged {
				fmt.Fprintf(g.stdout, "left %s alone: %s\n", u.Checkpoint, u.Why)
			}
		}
	}
}
