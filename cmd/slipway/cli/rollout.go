package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// NewCmdRollout groups the rollout verbs.
func NewCmdRollout(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Move a pool from one generation to the next in seven proven steps, with evidence and automatic rollback",
		Long: `A rollout moves a pool's claims to a new generation in the seed's order: (1) the
control plane understands both generations, (2) warm capacity of the new one, (3) proof
checks on its warm members (evidence committed and signed), (4) new claims routed to it,
(5) the old generation's runs drain, (6) its warm capacity is gone, (7) it is retained for
its rollback and restore windows. Every step is one commit to pools/<pool>/desired.yaml
with Slipway-Step trailers; a crashed driver resumes where it stopped.`,
	}
	cmd.AddCommand(newCmdRolloutStart(g), newCmdRolloutStatus(g), newCmdRolloutHistory(g), newCmdRolloutResume(g), newCmdRolloutAbort(g), newCmdRolloutRollback(g))
	return cmd
}

// rolloutFlags are the flags of the verbs that drive a rollout.
type rolloutFlags struct {
	rf               repoFlags
	server           string
	tokenFile        string
	signKey          string
	unsignedEvidence bool
	lease, poll      time.Duration
	kube             kubeFleetFlags
	// history: the verb reads the branch's history (rollout ids, steps),
	// so the repository is fetched whole.
	history bool
}

func (f *rolloutFlags) add(cmd *cobra.Command, drive bool) {
	f.rf.add(cmd)
	if !drive {
		return
	}
	cmd.Flags().StringVar(&f.server, "runtime", "", "the runtime's API (http://host:port)")
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "file holding the runtime API's bearer token")
	cmd.Flags().StringVar(&f.signKey, "sign-key", "", "cosign key (file or KMS URI) that signs the evidence; password from $"+passwordEnv)
	cmd.Flags().BoolVar(&f.unsignedEvidence, "unsigned-evidence", false, "commit the evidence as an unsigned statement (no --sign-key)")
	cmd.Flags().DurationVar(&f.lease, "lease", time.Minute, "how long the driver's lease lasts unless renewed")
	cmd.Flags().DurationVar(&f.poll, "poll", 500*time.Millisecond, "how often the driver looks at the runtime while a step waits for it")
	f.kube.add(cmd)
}

func (f *rolloutFlags) driver(cmd *cobra.Command, g *globals, drive bool) (*rollout.Driver, error) {
	if f.rf.repo == "" || f.rf.pool == "" {
		return nil, usage(errors.New("--repo and --pool are required"))
	}
	opts := f.rf.options()
	if f.history {
		opts = append(opts, gitops.WithDepth(0))
	}
	repo, err := gitops.Open(cmd.Context(), f.rf.repo, opts...)
	if err != nil {
		return nil, usage(err)
	}
	d := &rollout.Driver{Repo: repo, Branch: f.rf.branch, Pool: f.rf.pool, Log: g.progress.Wrap(g.stderr), Lease: f.lease, Poll: f.poll}
	if g.progress != nil {
		d.Progress = func(w rollout.Wait) { g.progress.Status(func(now time.Time) string { return waitLine(w, now) }) }
	}
	if !drive {
		return d, nil
	}
	switch {
	case f.server != "" && f.kube.kubeconfig != "":
		return nil, usage(errors.New("--runtime and --kubeconfig exclude each other: the pool runs on a runtime or on a cluster"))
	case f.kube.prover != "" && f.kube.kubeconfig == "":
		return nil, usage(errors.New("--prover is for --kubeconfig: a runtime (--runtime) runs its own proofs"))
	case f.kube.argoApp != "" && f.kube.kubeconfig == "":
		return nil, usage(errors.New("--argocd-application is for --kubeconfig: a runtime (--runtime) follows the config repository itself"))
	case f.kube.kubeconfig != "":
		fl, err := f.kube.fleet(cmd, &f.rf, f.tokenFile)
		if err != nil {
			return nil, err
		}
		d.Fleet = fl
	case f.server == "":
		return nil, usage(errors.New("--runtime (the runtime that runs the pool) or --kubeconfig (the cluster) is required to drive a rollout"))
	default:
		tok, err := readToken(f.tokenFile)
		if err != nil {
			return nil, err
		}
		c, err := runtimeapi.NewClient(f.server, tok)
		if err != nil {
			return nil, usage(err)
		}
		d.Fleet = c
	}
	switch {
	case f.signKey != "" && f.unsignedEvidence:
		return nil, usage(errors.New("--sign-key and --unsigned-evidence exclude each other"))
	case f.signKey != "":
		sv, err := sign.LoadSignerRef(cmd.Context(), f.signKey, keyPassword)
		if err != nil {
			return nil, usage(err)
		}
		d.Signer = sv
	case f.unsignedEvidence:
		d.UnsignedEvidence = true
	default:
		return nil, usage(errors.New("the evidence is signed: give --sign-key KEY (or --unsigned-evidence)"))
	}
	return d, nil
}

// run is a verb's RunE: it builds the driver (with the runtime and the
// evidence signer when drive) and calls fn with a context that SIGINT and
// SIGTERM end.
func (f *rolloutFlags) run(g *globals, drive bool, fn func(context.Context, *rollout.Driver) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		d, err := f.driver(cmd, g, drive)
		if err != nil {
			return err
		}
		ctx, stop := interruptible(cmd.Context())
		defer stop()
		return fn(ctx, d)
	}
}

// interruptible ends ctx on SIGINT or SIGTERM, so a driver stops between
// steps (its state is in the config repository; resume continues).
func interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// exitNotInProgress: rollout resume found no rollout in progress (the
// last one ended, how and when is on stderr; no start was committed since).
const exitNotInProgress = 3

// rolloutError maps a driver's error to an exit code: 3 when there is no
// rollout in progress to drive; 1 for a rollout that rolled back, failed,
// is held or refused; 2 for the rest.
func rolloutError(err error) error {
	if errors.Is(err, rollout.ErrNotInProgress) {
		return &exitError{code: exitNotInProgress, err: err}
	}
	for _, e := range []error{rollout.ErrRolledBack, rollout.ErrFailed, rollout.ErrHeld, rollout.ErrInProgress, rollout.ErrRefused, rollout.ErrNoRollout, rollout.ErrChanged, gitops.ErrConflict} {
		if errors.Is(err, e) {
			return failed(err)
		}
	}
	return usage(err)
}

// drive runs the rollout in progress (id "") or rollout id to its end and
// prints how it ended.
func (g *globals) drive(ctx context.Context, d *rollout.Driver, id string) error {
	run := d.Run
	if id != "" {
		run = func(ctx context.Context) (*pool.Rollout, error) { return d.Drive(ctx, id) }
	}
	r, err := run(ctx)
	if errors.Is(err, rollout.ErrRolledBack) {
		syncAfterRollback(ctx, g, d)
	}
	if perr := g.printRollout(r); perr != nil {
		return perr
	}
	if err != nil {
		return rolloutError(err)
	}
	return nil
}

func (g *globals) printRollout(r *pool.Rollout) error {
	if r == nil {
		return nil
	}
	if err := g.ci(rolloutStep(r)); err != nil {
		return err
	}
	if g.json() {
		return g.printJSON(r)
	}
	fmt.Fprintf(g.stdout, "%s %s: %s → %s, phase %s", r.ID, r.Status, orNone(r.From), r.To, r.Phase)
	if r.Reason != "" {
		fmt.Fprintf(g.stdout, ": %s", r.Reason)
	}
	fmt.Fprintln(g.stdout)
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func newCmdRolloutStart(g *globals) *cobra.Command {
	var (
		f    rolloutFlags
		to   string
		wait bool
	)
	cmd := &cobra.Command{
		Use:   "start --repo URL --pool P --to ID (--runtime URL --token-file FILE | --kubeconfig F [--namespace N] [--prover URL --token-file FILE] [--argocd-application NS/NAME]) [--wait]",
		Short: "Commit the intent to roll a pool out to a generation; with --wait, drive it to the end",
		Long: `Start commits the rollout's intent (phase compatibility). With --wait it then drives
the rollout through the seven steps under the lease in desired.yaml, and exits 0 only when it
succeeded; 1 when it rolled back (a proof failed, a deadline passed before routing) or failed
(visible and resumable: rollout resume). Without --wait, rollout resume drives it. If start
dies before its commit, nothing was started: rollout resume then exits 3 (no rollout in
progress) and start runs again.`,
		Example: `  slipway rollout start --repo ./config.git --pool agents --to g-2f1c… \
      --runtime http://127.0.0.1:7070 --token-file runtime.token --sign-key cosign.key --wait`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return usage(errors.New("--to ID is required (a generation in the config repository)"))
			}
			return f.run(g, wait, func(ctx context.Context, d *rollout.Driver) error {
				to, err := f.rf.resolveGeneration(cmd, to)
				if err != nil {
					return err
				}
				r, err := d.Start(ctx, to, false)
				if err != nil {
					return rolloutError(err)
				}
				if !wait {
					return g.printRollout(r)
				}
				return g.drive(ctx, d, r.ID)
			})(cmd, args)
		},
	}
	f.add(cmd, true)
	cmd.Flags().StringVar(&to, "to", "", "the generation to roll out (its id, or a unique prefix of it)")
	cmd.Flags().BoolVar(&wait, "wait", false, "drive the rollout to its end")
	return cmd
}

func newCmdRolloutResume(g *globals) *cobra.Command {
	var f rolloutFlags
	cmd := &cobra.Command{
		Use:   "resume [ROLLOUT] --repo URL --pool P (--runtime URL --token-file FILE | --kubeconfig F [--namespace N] [--prover URL --token-file FILE] [--argocd-application NS/NAME])",
		Short: "Drive the pool's rollout from where it stands to its end (after a crash, a failure, or start without --wait)",
		Long: `Resume drives the rollout in progress on the pool to its end, from the step where it
stands: after a driver died, after a visible failure, or after start without --wait. Exit
codes: 0 it succeeded; 1 it rolled back, failed (resumable), or another driver holds it;
3 there is no rollout in progress: the last one ended (the message says which, how and
when) and no rollout start was committed since, as when a driver died before its start
commit; an old outcome is never reported as this one's. Given a rollout id (or a unique
prefix of it), resume drives that rollout only: another one is an error.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.history = len(args) == 1
			return f.run(g, true, func(ctx context.Context, d *rollout.Driver) error {
				id := ""
				if len(args) == 1 {
					var err error
					if id, err = currentRollout(ctx, d, args[0]); err != nil {
						return err
					}
				}
				return g.drive(ctx, d, id)
			})(cmd, args)
		},
	}
	f.add(cmd, true)
	return cmd
}

func newCmdRolloutAbort(g *globals) *cobra.Command {
	var (
		f      rolloutFlags
		reason string
	)
	cmd := &cobra.Command{
		Use:   "abort [ROLLOUT] --repo URL --pool P [--reason TEXT]",
		Short: "Stop a rollout that has not routed claims yet: the new warm capacity goes, the active generation stays",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.history = len(args) == 1
			return f.run(g, false, func(ctx context.Context, d *rollout.Driver) error {
				if len(args) == 1 {
					if _, err := currentRollout(ctx, d, args[0]); err != nil {
						return err
					}
				}
				if reason == "" {
					reason = "by " + os.Getenv("USER")
				}
				r, err := d.Abort(ctx, reason)
				if err != nil {
					return rolloutError(err)
				}
				return g.printRollout(r)
			})(cmd, args)
		},
	}
	f.add(cmd, false)
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the commit and the rollout)")
	return cmd
}

func newCmdRolloutRollback(g *globals) *cobra.Command {
	var (
		f  rolloutFlags
		to string
	)
	cmd := &cobra.Command{
		Use:   "rollback --repo URL --pool P (--runtime URL --token-file FILE | --kubeconfig F [--namespace N] [--prover URL --token-file FILE] [--argocd-application NS/NAME]) [--to ID]",
		Short: "Make a retained generation active again (the newest one by default), warming and proving it first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(g, true, func(ctx context.Context, d *rollout.Driver) error {
				if to != "" {
					id, err := f.rf.resolveGeneration(cmd, to)
					if err != nil {
						return err
					}
					to = id
				}
				if to == "" {
					st, err := d.Status(ctx)
					if err != nil {
						return rolloutError(err)
					}
					cands := append(append([]string{}, st.Draining...), st.Retained...)
					if len(cands) == 0 {
						return failed(fmt.Errorf("pool %s has no retained generation to roll back to", f.rf.pool))
					}
					to = cands[len(cands)-1]
					if len(st.Draining) > 0 {
						to = st.Draining[len(st.Draining)-1]
					}
				}
				r, err := d.Start(ctx, to, true)
				if err != nil {
					return rolloutError(err)
				}
				return g.drive(ctx, d, r.ID)
			})(cmd, args)
		},
	}
	f.add(cmd, true)
	cmd.Flags().StringVar(&to, "to", "", "the retained generation (default: the one active before)")
	return cmd
}

// currentRollout is the whole id of the rollout arg names (an id or a
// unique prefix among the pool's rollouts), which must be the pool's
// rollout now.
func currentRollout(ctx context.Context, d *rollout.Driver, arg string) (string, error) {
	id, err := rollout.ResolveID(ctx, d.Repo, d.Branch, d.Pool, arg)
	if err != nil {
		return "", usage(err)
	}
	st, err := d.Status(ctx)
	if err != nil {
		return "", rolloutError(err)
	}
	if st.Rollout == nil || st.Rollout.ID != id {
		now := "it has none"
		if st.Rollout != nil {
			now = st.Rollout.ID + " is"
		}
		return "", failed(fmt.Errorf("%w: %s is not the rollout of pool %s now (%s)", rollout.ErrChanged, id, d.Pool, now))
	}
	return id, nil
}

func newCmdRolloutStatus(g *globals) *cobra.Command {
	var (
		f     rolloutFlags
		watch bool
		every time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status [ROLLOUT] --repo URL --pool P [--watch] [--output json]",
		Short: "Show the pool's rollout: its seven steps (commit, started, took, result, evidence) with a timeline, and the pool's generations",
		Long: `Status reads desired.yaml and the evidence at the head of the branch, and the rollout's
steps from the branch's history (the commits with its Slipway-Rollout trailer): for each of
the seven steps its result, when it started, how long it took, the commit that recorded it
and the evidence that commit gives, then a timeline. Only a step that runs shows its phase
deadline. Given a rollout id (or a unique prefix of it, see rollout history), status shows
that rollout's steps. With --watch it prints again whenever the rollout changes, until it
ends (succeeded, rolled back or failed). JSON has at least phase, active, target, draining,
retained, evidence and steps.`,
		Example: `  slipway rollout status --repo ./config.git --pool agents
  slipway rollout status ro-3f9a1c --repo ./config.git --pool agents -o yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.history = true
			return f.run(g, false, func(ctx context.Context, d *rollout.Driver) error {
				last := ""
				for {
					st, err := d.Status(ctx)
					if err != nil {
						return rolloutError(err)
					}
					if st.Revision != last {
						last = st.Revision
						var rec *rollout.Record
						if len(args) == 1 {
							if rec, err = rollout.ReadRecord(ctx, d.Repo, d.Branch, d.Pool, args[0]); err != nil {
								return usage(err)
							}
							st.Steps = rec.Steps
						} else if rec, err = d.WithSteps(ctx, st); err != nil {
							return rolloutError(err)
						}
						if err := printStatus(g, st, rec); err != nil {
							return err
						}
					}
					if !watch || st.Rollout == nil || st.Rollout.Status != pool.RolloutRunning {
						return nil
					}
					select {
					case <-ctx.Done():
						return nil
					case <-time.After(every):
					}
				}
			})(cmd, args)
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVar(&watch, "watch", false, "follow the rollout until it ends")
	cmd.Flags().DurationVar(&every, "interval", time.Second, "how often --watch looks")
	return cmd
}

func newCmdRolloutHistory(g *globals) *cobra.Command {
	var f rolloutFlags
	cmd := &cobra.Command{
		Use:   "history --repo URL --pool P",
		Short: "List every rollout of a pool: id, from and to generation, outcome, started, how long it took",
		Long: `History reads the pool's rollouts from the config repository's history, where the seven
steps leave one commit each with Slipway-Pool, Slipway-Rollout and Slipway-Step trailers,
newest first: the rollout's id (give it, or a unique prefix of it, to rollout status for its
steps), whether it was a rollback, the generations it moved from and to, its outcome
(succeeded, rolled-back, failed, running), the phase it ended in, when it started, how long
it took and why it ended as it did.`,
		Example: `  slipway rollout history --repo ./config.git --pool agents
  slipway rollout history --repo ./config.git --pool agents -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.history = true
			return f.run(g, false, func(ctx context.Context, d *rollout.Driver) error {
				recs, err := rollout.History(ctx, d.Repo, d.Branch, d.Pool)
				if err != nil {
					return rolloutError(err)
				}
				if g.json() {
					if recs == nil {
						recs = []*rollout.Record{}
					}
					return g.printJSON(map[string]any{"pool": d.Pool, "rollouts": recs})
				}
				return printHistory(g.stdout, recs)
			})(cmd, args)
		},
	}
	f.add(cmd, false)
	return cmd
}

func printStatus(g *globals, st *rollout.Status, rec *rollout.Record) error {
	if g.json() {
		return g.printJSON(st)
	}
	w := g.stdout
	now := time.Now()
	fmt.Fprintf(w, "pool %s at %s\n", st.Pool, shortRev(st.Revision))
	switch {
	case rec != nil:
		kind := "rollout"
		if rec.Rollback {
			kind = "rollback"
		}
		fmt.Fprintf(w, "  %-9s %s %s: %s → %s, phase %s, started %s", kind, rec.ID, rec.Outcome, orNone(rec.From), rec.To, rec.Phase, rec.Started.UTC().Format(time.RFC3339))
		if !rec.Ended.IsZero() {
			fmt.Fprintf(w, ", took %s", rec.Duration().Round(time.Second))
		}
		fmt.Fprintln(w)
		if rec.Reason != "" {
			fmt.Fprintf(w, "  reason    %s\n", rec.Reason)
		}
		if r := st.Rollout; r != nil && r.ID == rec.ID && r.Holder != "" {
			fmt.Fprintf(w, "  held by   %s until %s\n", r.Holder, r.LeaseUntil.Format(time.RFC3339))
		}
	case st.Rollout != nil:
		r := st.Rollout
		fmt.Fprintf(w, "  rollout   %s %s: %s → %s, phase %s\n", r.ID, r.Status, orNone(r.From), r.To, r.Phase)
	default:
		fmt.Fprintln(w, "  rollout   none yet")
	}
	list := func(xs []string) string {
		if len(xs) == 0 {
			return "-"
		}
		return strings.Join(xs, ", ")
	}
	fmt.Fprintf(w, "  active    %s\n  target    %s\n  warming   %s\n  draining  %s\n  retained  %s\n", orNone(st.Active), orNone(st.Target), list(st.Warming), list(st.Draining), list(st.Retained))
	if len(st.DrainingRuns) > 0 {
		fmt.Fprintf(w, "  still running on the draining generation: %s\n", list(st.DrainingRuns))
	}
	if rec != nil {
		fmt.Fprintln(w)
		if err := printSteps(w, rec, now); err != nil {
			return err
		}
	}
	if len(st.Evidence) > 0 && (rec == nil || st.Rollout == nil || rec.ID == st.Rollout.ID) {
		fmt.Fprintln(w)
		for _, e := range st.Evidence {
			mark := "pass"
			if !e.Passed {
				mark = "FAIL"
			}
			fmt.Fprintf(w, "  proof  %-18s %s  %s\n", e.Check, mark, e.Reason)
		}
	}
	return nil
}

func shortRev(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
