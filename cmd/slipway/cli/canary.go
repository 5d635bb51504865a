package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/canary"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// NewCmdCanary runs the continuous canary of a pool, and reads its history.
func NewCmdCanary(g *globals) *cobra.Command {
	var (
		server, tokenFile, pool, approved, denied, historyFile, metricsListen, env string
		interval, roundTimeout                                                     time.Duration
		once                                                                       bool
		lines, historyMax                                                          int
	)
	cmd := &cobra.Command{
		Use:   "canary --runtime URL --token-file F --pool P [--interval D | --once] [--approved URL] [--denied URL] [--history FILE]",
		Short: "Claim, prove, probe and release a sandbox of a pool on an interval; a failing round alerts",
		Long: `Each round claims a sandbox of the pool, checks its runner's identity against the run manifest,
reaches --approved through the sandbox's egress proxy and is refused --denied, writes and reads back a
file in the workspace, streams numbered lines and checks them, checkpoints, suspends and resumes the
claim and reads a file back (on a runtime that keeps checkpoints; skipped otherwise: the runtime records
the restore, so 'slipway checkpoint durable' answers when restore was last proved), and releases the
claim and checks the release. Each round is appended to --history (JSONL, at most --history-max rounds), counted in the
metrics served on --metrics-listen (canary_rounds_total, canary_failures_total, canary_step_duration,
canary_last_success_timestamp) and logged as JSON on stderr: a failing round is an ERROR line naming
the pool and the step. With --once, one round, and exit 1 when it failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if server == "" || pool == "" {
				return usage(errors.New("--runtime and --pool are required"))
			}
			tok, err := readToken(tokenFile)
			if err != nil {
				return err
			}
			client, err := runtimeapi.NewClient(server, tok)
			if err != nil {
				return usage(err)
			}
			var mopts []telemetry.Option
			if env != "" {
				mopts = append(mopts, telemetry.WithEnvironment(env))
			}
			m, err := telemetry.NewMetrics(mopts...)
			if err != nil {
				return usage(err)
			}
			defer m.Shutdown(cmd.Context())
			cm, err := telemetry.NewCanaryMetrics(m)
			if err != nil {
				return usage(err)
			}
			opts := []canary.Option{canary.WithApproved(approved), canary.WithDenied(denied), canary.WithLines(lines),
				canary.WithRoundTimeout(roundTimeout), canary.WithMetrics(cm),
				canary.WithLogger(slog.New(slog.NewJSONHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))}
			if historyFile != "" {
				h, err := canary.NewHistory(historyFile, historyMax)
				if err != nil {
					return usage(err)
				}
				opts = append(opts, canary.WithHistory(h))
			}
			c, err := canary.New(client, pool, opts...)
			if err != nil {
				return usage(err)
			}
			if metricsListen != "" {
				ln, err := net.Listen("tcp", metricsListen)
				if err != nil {
					return usage(fmt.Errorf("--metrics-listen: %w", err))
				}
				mux := http.NewServeMux()
				mux.Handle("GET /metrics", m.Handler())
				srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
				go srv.Serve(ln)
				defer srv.Close()
				fmt.Fprintf(g.stderr, "metrics on %s\n", ln.Addr())
			}
			if !once {
				return c.Run(cmd.Context(), interval)
			}
			r, herr := c.Round(cmd.Context())
			if errors.Is(herr, canary.ErrInterrupted) {
				return failed(herr)
			}
			if g.json() {
				_ = g.printJSON(r)
			} else {
				printRound(g, r)
			}
			switch {
			case !r.Passed:
				return silent(exitFailed)
			case herr != nil:
				return failed(herr)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&server, "runtime", "", "the runtime's URL, e.g. http://127.0.0.1:7070")
	f.StringVar(&tokenFile, "token-file", "", "file holding the runtime's API token")
	f.StringVar(&pool, "pool", "", "the pool to claim from")
	f.DurationVar(&interval, "interval", time.Minute, "time between rounds")
	f.BoolVar(&once, "once", false, "run one round and exit: 0 when it passed, 1 when it failed")
	f.StringVar(&approved, "approved", "", "a destination the pool allows (URL or host:port): reached through the egress proxy")
	f.StringVar(&denied, "denied", "", "a destination the pool denies (URL or host:port): must be refused")
	f.StringVar(&historyFile, "history", "", "append each round to this JSONL file")
	f.IntVar(&historyMax, "history-max", canary.DefaultMaxRounds, "rounds the history keeps (the oldest go)")
	f.StringVar(&metricsListen, "metrics-listen", "", "serve Prometheus metrics on this address at /metrics (no token: bind it where only scrapers reach)")
	f.StringVar(&env, "environment", "", "label every metric environment=NAME")
	f.IntVar(&lines, "lines", 1000, "numbered lines the output step streams")
	f.DurationVar(&roundTimeout, "round-timeout", 2*time.Minute, "time a round may take (its release gets 30s more)")
	cmd.AddCommand(newCmdCanaryHistory(g))
	return cmd
}

func newCmdCanaryHistory(g *globals) *cobra.Command {
	var file string
	var n int
	cmd := &cobra.Command{
		Use:   "history --history FILE [-n N]",
		Short: "Print the last rounds of a canary's history (-o json for JSON)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usage(errors.New("--history is required"))
			}
			if n < 0 {
				return usage(fmt.Errorf("-n %d: want 0 (all) or more", n))
			}
			rounds, bad, err := canary.ReadHistory(file, n)
			if err != nil {
				return usage(err)
			}
			for _, b := range bad {
				fmt.Fprintf(g.stderr, "slipway: %s line %d: skipped: %v\n", file, b.Line, b.Err)
			}
			if g.json() {
				if rounds == nil {
					rounds = []canary.Round{}
				}
				return g.printJSON(rounds)
			}
			for i := range rounds {
				printRound(g, &rounds[i])
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "history", "", "the canary's history file")
	cmd.Flags().IntVarP(&n, "n", "n", 20, "rounds to print, newest last (0: all)")
	return cmd
}

// printRound prints a round on one line: time, pool, result, run, each
// step's time; a failed round says which step and why on the next line.
func printRound(g *globals, r *canary.Round) {
	result := "PASS"
	if !r.Passed {
		result = "FAIL"
	}
	var steps []string
	for _, s := range r.Steps {
		switch s.Result {
		case canary.Skipped:
			steps = append(steps, s.Step+"=-")
		case canary.Fail:
			steps = append(steps, s.Step+"=FAIL")
		default:
			steps = append(steps, fmt.Sprintf("%s=%s", s.Step, s.Duration.Round(time.Millisecond)))
		}
	}
	run := r.RunID
	if run == "" {
		run = "(no run)"
	}
	fmt.Fprintf(g.stdout, "%s  %s  %s  %s  %s\n", r.Started.Format(time.RFC3339), r.Pool, result, run, strings.Join(steps, " "))
	if !r.Passed {
		fmt.Fprintf(g.stdout, "    failed at %s: %s\n", r.FailedStep, r.Reason)
	}
}
