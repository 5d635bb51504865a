package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// NewCmdCheckpoint groups checkpoints of runs: create, suspend, resume,
// and what is durable for a run.
func NewCmdCheckpoint(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "checkpoint", Short: "Checkpoint, suspend and resume runs; say what is durable for a run"}
	cmd.AddCommand(newCmdCheckpointOp(g, "create", "Freeze a run's sandbox, write its workspace as a signed checkpoint, thaw it"),
		newCmdCheckpointOp(g, "suspend", "Checkpoint a run and delete its sandbox; the run stays open until resume or release"),
		newCmdCheckpointResume(g), newCmdCheckpointDurable(g))
	return cmd
}

// checkpointFlags reach a runtime's API and hold a claim's token.
type checkpointFlags struct{ server, tokenFile, claimTokenFile string }

func (f *checkpointFlags) add(cmd *cobra.Command, claim bool) {
	cmd.Flags().StringVar(&f.server, "runtime", "", "the runtime's API, e.g. http://127.0.0.1:7070")
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "file holding the API's bearer token")
	if claim {
		cmd.Flags().StringVar(&f.claimTokenFile, "claim-token-file", "", "file holding the run's claim (fencing) token")
	}
}

func (f *checkpointFlags) client(claim bool) (*runtimeapi.Client, string, error) {
	if f.server == "" {
		return nil, "", usage(errors.New("--runtime is required"))
	}
	tok, err := readToken(f.tokenFile)
	if err != nil {
		return nil, "", err
	}
	c, err := runtimeapi.NewClient(f.server, tok)
	if err != nil {
		return nil, "", usage(err)
	}
	var claimTok string
	if claim {
		if f.claimTokenFile == "" {
			return nil, "", usage(errors.New("--claim-token-file is required"))
		}
		if claimTok, err = readToken(f.claimTokenFile); err != nil {
			return nil, "", err
		}
	}
	return c, claimTok, nil
}

func newCmdCheckpointOp(g *globals, verb, short string) *cobra.Command {
	var f checkpointFlags
	var seq int64
	cmd := &cobra.Command{
		Use:   verb + " RUN --runtime URL --token-file FILE --claim-token-file FILE [--event-seq N]",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, claimTok, err := f.client(true)
			if err != nil {
				return err
			}
			b := runtimeapi.CheckpointBody{Token: claimTok, EventSeq: seq}
			var res *runtimeapi.CheckpointResult
			if verb == "suspend" {
				res, err = c.Suspend(cmd.Context(), args[0], b)
			} else {
				res, err = c.Checkpoint(cmd.Context(), args[0], b)
			}
			if err != nil {
				return failed(err)
			}
			return g.printJSON(res)
		},
	}
	f.add(cmd, true)
	cmd.Flags().Int64Var(&seq, "event-seq", 0, "the job's event sequence at the checkpoint, named by its attestation")
	return cmd
}

func newCmdCheckpointResume(g *globals) *cobra.Command {
	var f checkpointFlags
	cmd := &cobra.Command{
		Use:   "resume RUN --runtime URL --token-file FILE --claim-token-file FILE",
		Short: "Verify a suspended run's checkpoint and restore it into a new sandbox; print the new grant",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, claimTok, err := f.client(true)
			if err != nil {
				return err
			}
			gr, err := c.Resume(cmd.Context(), args[0], runtimeapi.ResumeBody{Token: claimTok})
			if err != nil {
				return failed(err)
			}
			return g.printJSON(gr)
		},
	}
	f.add(cmd, true)
	return cmd
}

func newCmdCheckpointDurable(g *globals) *cobra.Command {
	var f checkpointFlags
	cmd := &cobra.Command{
		Use:   "durable RUN --runtime URL --token-file FILE",
		Short: "What state is durable for a run, where its head is, and when a restore of it was last proved",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := f.client(false)
			if err != nil {
				return err
			}
			d, err := c.Durable(cmd.Context(), args[0])
			if err != nil {
				return failed(err)
			}
			if g.json() {
				return g.printJSON(d)
			}
			fmt.Fprintf(g.stdout, "run %s\ndurable: %v\n", d.RunID, d.Durable)
			if d.Head == "" {
				fmt.Fprintln(g.stdout, "head: none (never checkpointed)")
			} else {
				seq := fmt.Sprintf("event sequence %d", d.HeadEventSeq)
				if d.HeadEventSeqUnknown {
					seq = "event sequence not known to the runtime (a rollout's drain took it)"
				}
				fmt.Fprintf(g.stdout, "head: %s (taken %s, %s; %s)\n", d.Head, d.HeadCreated.Format("2006-01-02T15:04:05Z07:00"), seq, plural(d.Checkpoints, "checkpoint", "checkpoints"))
			}
			if d.LastRestore == nil {
				fmt.Fprintln(g.stdout, "restore proved: never")
			} else {
				fmt.Fprintf(g.stdout, "restore proved: %s by %s%s (checkpoint %s into %s)\n", d.LastRestore.At.Format("2006-01-02T15:04:05Z07:00"), d.LastRestore.By,
					actedBy(d.LastRestore.Actor, d.LastRestore.Reason), d.LastRestore.Checkpoint, d.LastRestore.Into)
			}
			if d.Suspended {
				fmt.Fprintln(g.stdout, "suspended: yes (no sandbox until resume)")
			}
			if s := d.LastSuspend; s != nil {
				fmt.Fprintf(g.stdout, "last suspend: %s by %s%s (checkpoint %s)\n", s.At.Format("2006-01-02T15:04:05Z07:00"), s.By, actedBy(s.Actor, s.Reason), s.Checkpoint)
			}
			return nil
		},
	}
	f.add(cmd, false)
	return cmd
}

// actedBy is " ACTOR: REASON" for an operator's action (the runtime
// refuses control characters in both), "" for the others.
func actedBy(actor, reason string) string {
	if actor == "" && reason == "" {
		return ""
	}
	return " " + actor + ": " + reason
}
