package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/internal/idprefix"
	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/control"
	"github.com/slipway-dev/slipway/pkg/control/incidents"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// NewCmdControl is the control plane's process.
func NewCmdControl(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "control", Short: "The control plane: tenants, jobs, admission, limits"}
	var c control.ServeConfig
	var db dbFlags
	serve := &cobra.Command{
		Use:   "serve --repo URL --db sqlite:PATH|--db-file FILE --listen ADDR --pool-runtime POOL=URL,TOKEN-FILE...",
		Short: "Serve the jobs API and dispatch admitted jobs to the runtimes",
		Long: `Serve reads tenants/, profiles/ and pricing.yaml from the config repository, stores jobs in the
database (SQLite by default; PostgreSQL for several replicas on one database), admits them fairly
within each tenant's concurrency, queue bound and budget, and dispatches them through River to the
runtimes serving their pool (--pool-runtime, repeatable; only the control plane holds their tokens).
Operators read the incidents its store shows at GET /v1/incidents (as slipway incidents --db does).

The files of its secrets (--db-file, the --pool-runtime token files) may come after it starts (a
Secret created after the pod): it serves /healthz, stays not ready on /readyz and logs one line per
distinct error naming the file, and the Secret and key it is mounted from when $SLIPWAY_SECRET_MOUNTS
says (DIR=SECRET,...), until they are there; the DSN file is read again on each try to reach the
database. The config repository's token may be a file, $SLIPWAY_GIT_TOKEN_FILE, read before each fetch.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.ConfigRepo == "" || c.Listen == "" {
				return usage(errors.New("--repo and --listen are required"))
			}
			var err error
			if c.DB, c.DBFile, err = db.source(); err != nil {
				return err
			}
			if c.Mounts, err = secretMounts(); err != nil {
				return err
			}
			c.Failpoint = os.Getenv("SLIPWAY_TEST_FAILPOINT") // crash tests only
			c.OTLP = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
			c.Logger = slog.New(slog.NewJSONHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			// GET /v1/incidents: what slipway incidents --db reads, from
			// the plane's own store.
			c.Incidents = func(ctx context.Context, st *control.Store) (*incidents.Report, error) {
				return incidents.Collect(ctx, incidents.FromControl(st, nil))
			}
			err = control.Serve(cmd.Context(), c, func(addr string) { fmt.Fprintf(g.stderr, "serving on %s\n", addr) })
			if err != nil && cmd.Context().Err() == nil {
				return usage(err)
			}
			return nil
		},
	}
	f := serve.Flags()
	f.StringVar(&c.ConfigRepo, "repo", "", "the config repository (path, file://, http(s)://, ssh://)")
	f.StringVar(&c.Branch, "branch", "main", "its branch")
	db.add(f, "the database")
	f.StringVar(&c.Listen, "listen", "", "address of the API, e.g. 127.0.0.1:7080")
	f.StringArrayVar(&c.Runtimes, "pool-runtime", nil, "a runtime serving a pool: POOL=URL,TOKEN-FILE (repeatable)")
	f.IntVar(&c.MaxActive, "max-active", 64, "jobs admitted, allocating or running at once")
	f.IntVar(&c.Reserve, "reserve", 0, "slots a tenant at or over its fair share leaves to the others, at least; with a backlog it also leaves one per other tenant with work below its share; a burst may take one beyond its share (0: a quarter of --max-active; -1: none)")
	f.IntVar(&c.QueueBound, "queue-bound", 10000, "queued jobs of all tenants at most")
	f.IntVar(&c.DispatchAttempts, "dispatch-attempts", 5, "the retry budget of a failing dispatch")
	f.DurationVar(&c.Lease, "lease", 15*time.Second, "how long a job's owner holds it without a heartbeat")
	f.DurationVar(&c.ConfigRefresh, "config-refresh", 5*time.Second, "how often the config repository is read")
	f.DurationVar(&c.Grace, "grace", 2*time.Second, "time between SIGTERM and SIGKILL when a deadline stops a command")
	f.StringVar(&c.Environment, "environment", "", "label every metric environment=NAME (e.g. prod)")
	cmd.AddCommand(serve)
	return cmd
}

// NewCmdTenant manages tenants' API tokens in the control plane's database.
func NewCmdTenant(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tenant", Short: "Tenants' API tokens (tenants themselves are files in the config repository)"}
	tok := &cobra.Command{Use: "token", Short: "Create, list and revoke API tokens"}
	var db dbFlags
	var scope, label string
	create := &cobra.Command{
		Use:   "create TENANT --db DSN [--scope tenant|operator] [--label L]",
		Short: "Create a token and print it once: only its hash is stored",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openStore(cmd, &db)
			if err != nil {
				return err
			}
			defer s.Close()
			text, t, err := s.CreateToken(cmd.Context(), args[0], scope, label)
			if err != nil {
				return usage(err)
			}
			if g.json() {
				return g.printJSON(struct {
					*control.Token
					Text string `json:"token"`
				}{t, text})
			}
			fmt.Fprintln(g.stdout, text)
			fmt.Fprintf(g.stderr, "token %s for %s (%s): shown once, keep it in a secret store\n", t.ID, t.Tenant, t.Scope)
			return nil
		},
	}
	create.Flags().StringVar(&scope, "scope", controlapi.ScopeTenant, "tenant (its own jobs) or operator (every job, audited)")
	create.Flags().StringVar(&label, "label", "", "a note saying what the token is for")
	var tenant string
	list := &cobra.Command{
		Use:   "list --db DSN [--tenant T]",
		Short: "List tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := openStore(cmd, &db)
			if err != nil {
				return err
			}
			defer s.Close()
			ts, err := s.ListTokens(cmd.Context(), tenant)
			if err != nil {
				return usage(err)
			}
			if g.json() {
				return g.printJSON(map[string]any{"tokens": ts})
			}
			for _, t := range ts {
				state := "live"
				if t.RevokedAt != nil {
					state = "revoked " + t.RevokedAt.Format(time.RFC3339)
				}
				fmt.Fprintf(g.stdout, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Tenant, t.Scope, t.CreatedAt.Format(time.RFC3339), state, t.Label)
			}
			return nil
		},
	}
	list.Flags().StringVar(&tenant, "tenant", "", "only this tenant's")
	revoke := &cobra.Command{
		Use:   "revoke ID --db DSN",
		Short: "Revoke a token at once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openStore(cmd, &db)
			if err != nil {
				return err
			}
			defer s.Close()
			if err := s.RevokeToken(cmd.Context(), args[0]); err != nil {
				return failed(err)
			}
			fmt.Fprintf(g.stderr, "revoked %s\n", args[0])
			return nil
		},
	}
	for _, c := range []*cobra.Command{create, list, revoke} {
		db.add(c.Flags(), "the control plane's database")
		tok.AddCommand(c)
	}
	cmd.AddCommand(tok)
	return cmd
}

func openStore(cmd *cobra.Command, db *dbFlags) (*control.Store, error) {
	dsn, err := db.resolve()
	if err != nil {
		return nil, err
	}
	s, err := control.Open(cmd.Context(), dsn)
	if err != nil {
		return nil, usage(err)
	}
	return s, nil
}

// jobFlags are how a job command reaches the control plane.
type jobFlags struct{ server, tokenFile string }

func (f *jobFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&f.server, "control", "", "the control plane's URL")
	c.Flags().StringVar(&f.tokenFile, "token-file", "", "file holding your API token")
}

func (f *jobFlags) client() (*controlapi.Client, error) {
	if f.server == "" || f.tokenFile == "" {
		return nil, usage(errors.New("--control and --token-file are required (or $SLIPWAY_CONTROL and $SLIPWAY_TOKEN_FILE)"))
	}
	tok, err := readToken(f.tokenFile)
	if err != nil {
		return nil, err
	}
	c, err := controlapi.NewClient(f.server, tok)
	if err != nil {
		return nil, usage(err)
	}
	return c, nil
}

// resolveJob is the whole id of the job arg names (a whole id or a unique
// prefix): an unknown, short or ambiguous prefix is a usage error, a
// control plane that does not answer a failure.
func resolveJob(ctx context.Context, c *controlapi.Client, arg string) (string, error) {
	id, err := c.Resolve(ctx, arg)
	switch {
	case err == nil:
		return id, nil
	case errors.Is(err, idprefix.ErrNoMatch), errors.Is(err, idprefix.ErrAmbiguous), errors.Is(err, idprefix.ErrTooShort), idprefix.Kind(arg) != "j-":
		return "", usage(err)
	}
	return "", failed(err)
}

// NewCmdJob submits and inspects jobs.
func NewCmdJob(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "job", Short: "Submit, follow, show, list and cancel jobs on the control plane"}
	var jf jobFlags
	cmd.AddCommand(newCmdJobSubmit(g, &jf), newCmdJobShow(g, &jf), newCmdJobList(g, &jf), newCmdJobCancel(g, &jf), newCmdJobTrace(g, &jf), newCmdJobLogs(g, &jf)) // job_logs.go
	return cmd
}

// newCmdJobSubmit is `job submit`: submit a job, and with --wait follow it to its end.
func newCmdJobSubmit(g *globals, jf *jobFlags) *cobra.Command {
	var spec controlapi.Spec
	var wait bool
	submit := &cobra.Command{
		Use:   "submit --pool P --profile NAME [--deadline D] [--command-timeout D] [--idempotency-key K] [--wait] -- CMD...",
		Short: "Submit a job; with --wait follow it and exit with its exit code",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := jf.client()
			if err != nil {
				return err
			}
			spec.Commands = [][]string{args}
			j, created, err := c.Submit(cmd.Context(), spec)
			if err != nil {
				return failed(err)
			}
			if !created {
				fmt.Fprintf(g.stderr, "idempotency key %s names job %s: not submitted again\n", spec.IdempotencyKey, j.ID)
			}
			if !wait {
				if g.json() {
					return g.printJSON(j)
				}
				fmt.Fprintln(g.stdout, j.ID)
				return nil
			}
			fmt.Fprintf(g.stderr, "%s %s\n", j.ID, j.State)
			j, err = c.Wait(cmd.Context(), j.ID, 200*time.Millisecond, func(j *controlapi.Job) {
				if !g.json() {
					fmt.Fprintf(g.stderr, "%s %s %s\n", j.ID, j.State, j.Detail)
				}
			})
			if err != nil {
				return failed(err)
			}
			if g.json() {
				_ = g.printJSON(j)
			} else {
				io.WriteString(g.stdout, j.Output)
			}
			return jobExit(j)
		},
	}
	submit.Flags().StringVar(&spec.Pool, "pool", "", "the pool to run in")
	submit.Flags().StringVar(&spec.Profile, "profile", "", "the capability profile")
	submit.Flags().Float64Var(&spec.DeadlineSeconds, "deadline", 0, "seconds from admission to the end (default: the profile's maxDuration)")
	submit.Flags().Float64Var(&spec.CommandTimeoutSeconds, "command-timeout", 0, "seconds per command (default: the profile's)")
	submit.Flags().StringVar(&spec.IdempotencyKey, "idempotency-key", "", "the same key returns the same job, never a second one")
	submit.Flags().BoolVar(&wait, "wait", false, "follow the job and exit with its exit code (1 for a refused or failed job)")
	jf.add(submit)
	return submit
}

// newCmdJobShow is `job show`: a job's whole story.
func newCmdJobShow(g *globals, jf *jobFlags) *cobra.Command {
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a job's whole story: states with times, profile revision, runtime, sandbox, run, cost, why it ended",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := jf.client()
			if err != nil {
				return err
			}
			id, err := resolveJob(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			j, err := c.Get(cmd.Context(), id)
			if err != nil {
				return failed(err)
			}
			prof, perr := c.Profile(cmd.Context(), id)
			if g.json() {
				out := map[string]any{"job": j}
				if perr == nil {
					out["profile"] = prof
				} else {
					out["profileError"] = perr.Error()
				}
				return g.printJSON(out)
			}
			printJob(g.stdout, j, prof, perr)
			return nil
		},
	}
	jf.add(show)
	return show
}

// newCmdJobList is `job list`: jobs, newest first.
func newCmdJobList(g *globals, jf *jobFlags) *cobra.Command {
	var state string
	var limit int
	list := &cobra.Command{
		Use:   "list [--status S] [--limit N]",
		Short: "List jobs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := jf.client()
			if err != nil {
				return err
			}
			js, err := c.List(cmd.Context(), controlapi.State(state), limit)
			if err != nil {
				return failed(err)
			}
			if g.json() {
				return g.printJSON(map[string]any{"jobs": js})
			}
			for _, j := range js {
				fmt.Fprintf(g.stdout, "%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.Tenant, j.Pool, j.State, j.CreatedAt.Format(time.RFC3339), j.Reason)
			}
			return nil
		},
	}
	list.Flags().StringVar(&state, "status", "", "only jobs in this state (queued, running, succeeded, ...)")
	list.Flags().IntVar(&limit, "limit", 100, "at most this many")
	jf.add(list)
	return list
}

// newCmdJobCancel is `job cancel`.
func newCmdJobCancel(g *globals, jf *jobFlags) *cobra.Command {
	cancel := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a job",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := jf.client()
			if err != nil {
				return err
			}
			id, err := resolveJob(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			j, err := c.Cancel(cmd.Context(), id)
			if err != nil {
				return failed(err)
			}
			if g.json() {
				return g.printJSON(j)
			}
			fmt.Fprintf(g.stdout, "%s %s\n", j.ID, j.State)
			return nil
		},
	}
	jf.add(cancel)
	return cancel
}

// newCmdJobTrace is `job trace`: where a job's time went.
func newCmdJobTrace(g *globals, jf *jobFlags) *cobra.Command {
	traceCmd := &cobra.Command{
		Use:   "trace ID",
		Short: "Show where a job's time went: its trace as a tree of spans with durations",
		Long: `Trace prints the spans of the job's trace the control plane keeps in memory (a bounded ring per
replica), with those the runtime that served the job keeps (asked by the control plane): the job,
admission, claim (the runtime's claim, sandbox ready, credential issue, runner awake under it), each
command (the runtime's command, the runner's exec and start under it) and release, each with its
duration, its start after the first span, and run_id, session_id, allocation_attempt and sandbox_id.
A workload's own spans belong under the runner exec span named by its TRACEPARENT. --output json
prints the spans as the API returns them.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := jf.client()
			if err != nil {
				return err
			}
			id, err := resolveJob(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			t, err := c.Trace(cmd.Context(), id)
			if err != nil {
				return failed(err)
			}
			if g.json() {
				return g.printJSON(t)
			}
			fmt.Fprintf(g.stdout, "job %s trace %s (replica %s", t.JobID, t.TraceID, t.Replica)
			if t.Runtime != "" {
				fmt.Fprintf(g.stdout, ", runtime %s", t.Runtime)
			}
			fmt.Fprintln(g.stdout, ")")
			if t.RuntimeError != "" {
				fmt.Fprintf(g.stdout, "runtime %s: %s\n", t.Runtime, t.RuntimeError)
			}
			if len(t.Spans) == 0 {
				fmt.Fprintln(g.stdout, "no spans: this replica did not record the job, or its ring has moved past it")
				return nil
			}
			spans := make([]telemetry.SpanRecord, len(t.Spans))
			for i, s := range t.Spans {
				spans[i] = telemetry.SpanRecord(s)
			}
			return telemetry.WriteTree(g.stdout, spans)
		},
	}
	jf.add(traceCmd)
	return traceCmd
}

// jobExit is a finished job's exit code: the command's, or 1 for a job
// that was refused, failed without one, or whose outcome is unknown.
func jobExit(j *controlapi.Job) error {
	switch {
	case j.State == controlapi.Succeeded:
		return nil
	case j.ExitCode != nil && *j.ExitCode != 0 && j.State == controlapi.Failed:
		return silent(*j.ExitCode)
	}
	return failed(fmt.Errorf("job %s %s: %s", j.ID, j.State, strings.TrimPrefix(j.Reason+": "+j.Detail, ": ")))
}

func printJob(w io.Writer, j *controlapi.Job, prof *controlapi.JobProfile, perr error) {
	fmt.Fprintf(w, "job %s (tenant %s, key %s)\n", j.ID, j.Tenant, j.IdempotencyKey)
	fmt.Fprintf(w, "state:    %s", j.State)
	if j.Reason != "" {
		fmt.Fprintf(w, " (%s)", j.Reason)
	}
	fmt.Fprintln(w)
	if j.Detail != "" {
		fmt.Fprintf(w, "why:      %s\n", j.Detail)
	}
	if j.State == controlapi.Unknown {
		fmt.Fprintf(w, "owner:    %s, by %s\n", j.Owner, j.OwnerDeadline.Format(time.RFC3339))
	}
	fmt.Fprintf(w, "pool:     %s\n", j.Pool)
	fmt.Fprintf(w, "profile:  %s at %s (%s, %s)\n", j.Profile.Name, j.Profile.Revision, j.Profile.Path, j.Profile.Digest)
	if prof != nil {
		p := prof.Profile
		fmt.Fprintf(w, "          as then: network %s, maxDuration %s, output %d bytes / %d lines; read from %s; now %s\n",
			p.Network.Mode, p.MaxDuration, p.MaxOutputBytes, p.MaxOutputLines, prof.Source, prof.Current)
	} else if perr != nil {
		fmt.Fprintf(w, "          (profile as then: %v)\n", perr)
	}
	fmt.Fprintf(w, "limits:   deadline %s, command timeout %s, output %d bytes / %d lines\n",
		time.Duration(j.Limits.Deadline), time.Duration(j.Limits.CommandTimeout), j.Limits.MaxOutputBytes, j.Limits.MaxOutputLines)
	if j.RunID != "" {
		adopted := ""
		if j.Adopted {
			adopted = ", adopted after a restart"
		}
		fmt.Fprintf(w, "runtime:  %s, run %s, sandbox %s, generation %s, attempt %d (request key %s%s)\n",
			j.Runtime, j.RunID, j.SandboxID, j.Generation, j.Attempt, j.RequestKey, adopted)
	}
	if h := j.Stream; h != nil {
		state := "open"
		if h.Ended {
			state = "ended with the result"
		}
		trimmed := ""
		if h.TrimmedThrough > 0 {
			trimmed = fmt.Sprintf(", retention deleted output through %d", h.TrimmedThrough)
		}
		fmt.Fprintf(w, "durable:  this record; its event stream through sequence %d (%s%s: slipway job logs resumes from any sequence); ", h.Last, state, trimmed)
		printJobCheckpoint(w, j) // control_checkpoint.go
	}
	switch {
	case !j.Cost.Known:
		fmt.Fprintf(w, "cost:     unknown (pool %s has no price)\n", j.Pool)
	default:
		fmt.Fprintf(w, "cost:     %.6f %s (worst case %.6f at %.4f/h)\n", j.Cost.Amount, j.Cost.Currency, j.Cost.WorstCase, j.Cost.RatePerHour)
	}
	for _, r := range j.Results {
		code := "none"
		if r.ExitCode != nil {
			code = fmt.Sprint(*r.ExitCode)
		}
		fmt.Fprintf(w, "command:  %v exit %s in %.3fs", r.Argv, code, r.Seconds)
		if r.Stop != "" {
			fmt.Fprintf(w, ", %s", r.Stop)
		}
		fmt.Fprintln(w)
	}
	if j.StopOutcome != "" {
		fmt.Fprintf(w, "stopped:  %s\n", j.StopOutcome)
	}
	if c := j.Cancellation; c != nil {
		fmt.Fprintf(w, "canceled: requested %s (fence %d)\n", c.RequestedAt.Format("15:04:05.000"), c.Fence)
		for _, st := range c.Steps {
			fmt.Fprintf(w, "  %s  %-21s %-15s %s\n", st.At.Format("15:04:05.000"), st.Step, st.Outcome, st.Detail)
		}
	}
	fmt.Fprintln(w, "story:")
	for _, t := range j.Story {
		fmt.Fprintf(w, "  %s  %-17s %s\n", t.At.Format("15:04:05.000"), t.State, t.Reason)
	}
	for _, n := range j.Notes {
		fmt.Fprintf(w, "note:     %s %s\n", n.At.Format("15:04:05.000"), n.Text)
	}
	printDelivery(w, j) // control_delivery.go
	if j.Output != "" {
		fmt.Fprintf(w, "output (%d bytes and %d lines dropped):\n%s", j.OutputDroppedBytes, j.OutputDroppedLines, j.Output)
		if !strings.HasSuffix(j.Output, "\n") {
			fmt.Fprintln(w)
		}
	}
}
