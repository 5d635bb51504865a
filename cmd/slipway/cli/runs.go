package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/internal/idprefix"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
)

// NewCmdRuns groups the run manifest queries.
func NewCmdRuns(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "runs", Short: "Which artifacts produced a run, and which runs used an artifact"}
	cmd.AddCommand(newCmdRunsShow(g), newCmdRunsQuery(g), newCmdRunsRelated(g))
	return cmd
}

// runSource is where run manifests are read from: the state directory's
// store, or a runtime's API.
type runSource interface {
	Get(ctx context.Context, runID string) (*runmanifest.Manifest, error)
	Query(ctx context.Context, q runmanifest.Query) ([]string, error)
	Close() error
}

// runByPrefix reads the run whose id prefix starts (at least 6 characters
// after r-), when no run has that whole id (notFound); an ambiguous prefix
// lists the candidates.
func runByPrefix(ctx context.Context, s runSource, prefix string, notFound error) (*runmanifest.Manifest, error) {
	if idprefix.Check(prefix, "r-", "run") != nil {
		return nil, notFound
	}
	ids, err := s.Query(ctx, runmanifest.Query{RunIDPrefix: prefix, Limit: 20})
	if err != nil {
		return nil, err
	}
	id, err := idprefix.Resolve(prefix, "r-", "run", "the run manifests", ids)
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, id)
}

// stateFlags name where run manifests are read from.
type stateFlags struct{ state, server, tokenFile string }

func (f *stateFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.state, "state", "", "the runtime's state directory (runs are read from its "+runs.StateFile+")")
	cmd.Flags().StringVar(&f.server, "runtime", "", "a runtime's API (http://host:port), instead of --state")
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "file holding the API's bearer token (with --runtime)")
}

func (f *stateFlags) open(cmd *cobra.Command) (runSource, error) {
	switch {
	case f.state != "" && f.server != "":
		return nil, usage(errors.New("give --state DIR or --runtime URL, not both"))
	case f.server != "":
		tok, err := readToken(f.tokenFile)
		if err != nil {
			return nil, err
		}
		c, err := runtimeapi.NewClient(f.server, tok)
		if err != nil {
			return nil, usage(err)
		}
		return apiRuns{c}, nil
	case f.state == "":
		return nil, usage(errors.New("--state DIR or --runtime URL is required"))
	case f.tokenFile != "":
		return nil, usage(errors.New("--token-file goes with --runtime"))
	}
	file := filepath.Join(f.state, runs.StateFile)
	if _, err := os.Stat(file); err != nil {
		return nil, usage(fmt.Errorf("no run manifests at %s: %w", file, err))
	}
	s, err := runs.OpenSQLite(cmd.Context(), file)
	if err != nil {
		return nil, usage(err)
	}
	return s, nil
}

// apiRuns reads run manifests from a runtime's API; an unknown run is
// runs.ErrNotFound, a refused query runs.ErrInvalid, as from a store.
type apiRuns struct{ c *runtimeapi.Client }

func (a apiRuns) Get(ctx context.Context, runID string) (*runmanifest.Manifest, error) {
	m, err := a.c.Run(ctx, runID)
	return m, apiErr(err)
}

func (a apiRuns) Query(ctx context.Context, q runmanifest.Query) ([]string, error) {
	ids, err := a.c.Query(ctx, q)
	return ids, apiErr(err)
}

func (apiRuns) Close() error { return nil }

func apiErr(err error) error {
	var ae *runtimeapi.APIError
	if errors.As(err, &ae) {
		switch ae.Status {
		case http.StatusNotFound:
			return fmt.Errorf("%w: %s", runs.ErrNotFound, ae.Reason)
		case http.StatusBadRequest:
			return fmt.Errorf("%w: %s", runs.ErrInvalid, ae.Reason)
		}
	}
	return err
}

func newCmdRunsShow(g *globals) *cobra.Command {
	var (
		sf         stateFlags
		egressOnly bool
		lifecycle  bool
		fence      bool
	)
	cmd := &cobra.Command{
		Use:   "show RUN_ID [--egress]",
		Short: "Print a run manifest (JSON, the seed's snake_case fields), or with --egress the destinations its sandbox asked for",
		Long: `Print a run manifest: JSON, the seed's snake_case fields. RUN_ID may be a unique prefix of
the run's id (at least 6 characters after r-). Its "egress" lists the
connections the sandbox of an allow-list pool asked its egress proxy for;
"served_by" the control plane, runtime and runner that served the run, as each
measured itself (version, sha256 of its own binary, the image its install
declares). A control plane that ran from another image than the generation's
control-plane pin is flagged with a warning on standard error.

With --egress, only those attempts: one line each (time, method, destination, allowed
or denied, the allow-list entry that allowed it or why not, bytes out and in), or
with -o json {"run_id", "egress", "egress_dropped"}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := sf.open(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			m, err := s.Get(cmd.Context(), args[0])
			if errors.Is(err, runs.ErrNotFound) {
				m, err = runByPrefix(cmd.Context(), s, args[0], err)
			}
			if errors.Is(err, runs.ErrNotFound) || errors.Is(err, idprefix.ErrNoMatch) {
				return failed(err)
			}
			if err != nil {
				return usage(err)
			}
			for _, d := range m.Mismatches() { // served by other than pinned: said on stderr, the manifest stays as recorded
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: run %s: %s\n", m.RunID, d)
			}
			if lifecycle {
				return printLifecycle(g, m)
			}
			if fence {
				return printFence(g, m)
			}
			if !egressOnly {
				return g.printJSON(m)
			}
			if g.json() {
				as := m.Egress
				if as == nil {
					as = []runmanifest.EgressAttempt{}
				}
				return g.printJSON(map[string]any{"run_id": m.RunID, "egress": as, "egress_dropped": m.EgressDropped})
			}
			return printEgress(cmd.OutOrStdout(), m)
		},
	}
	sf.add(cmd)
	cmd.Flags().BoolVar(&egressOnly, "egress", false, "print only the run's egress attempts")
	cmd.Flags().BoolVar(&lifecycle, "lifecycle", false, "print where the run's time went: how its sandbox started and each lifecycle step's duration")
	cmd.Flags().BoolVar(&fence, "fence", false, "print who owns the run now and whether an earlier attempt's sandbox or credential can still act: fences and revocations")
	cmd.MarkFlagsMutuallyExclusive("egress", "lifecycle", "fence")
	return cmd
}

// printLifecycle writes how a run's sandbox started and its lifecycle
// steps, each with its time since the previous one, the longest marked.
func printLifecycle(g *globals, m *runmanifest.Manifest) error {
	steps := m.Lifecycle.Steps()
	if g.json() {
		if steps == nil {
			steps = []runmanifest.Step{}
		}
		return g.printJSON(map[string]any{"run_id": m.RunID, "start": m.Start(), "allocation_attempt": m.AllocationAttempt,
			"sandbox_id": m.SandboxID, "node_id": m.NodeID, "steps": steps})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "run %s: %s, allocation attempt %d, sandbox %s on node %s\n", m.RunID, m.Start(), m.AllocationAttempt, m.SandboxID, m.NodeID)
	longest := -1
	for i, s := range steps {
		if i > 0 && (longest < 0 || s.Took > steps[longest].Took) {
			longest = i
		}
	}
	for i, s := range steps {
		mark := ""
		if i == longest {
			mark = "  <- longest"
		}
		took := "+" + s.Took.Round(time.Microsecond).String()
		if s.Earlier {
			took = "(before the claim: the warm member was ready then)"
		}
		fmt.Fprintf(&b, "  %-20s %s  %s%s\n", s.Name, s.At.UTC().Format(time.RFC3339Nano), took, mark)
	}
	if len(steps) > 1 {
		fmt.Fprintf(&b, "  %-20s %s\n", "total", steps[len(steps)-1].At.Sub(steps[0].At).Round(time.Microsecond))
	}
	_, err := io.WriteString(g.stdout, b.String())
	return err
}

// printEgress writes a run's egress attempts, one line each, in one
// write (a line-wise consumer of the output sees whole lines).
func printEgress(out io.Writer, m *runmanifest.Manifest) error {
	var w bytes.Buffer
	tw := tabwriter.NewWriter(&w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tMETHOD\tDESTINATION\tRESULT\tRULE OR REASON\tBYTES OUT\tBYTES IN")
	for _, a := range m.Egress {
		result, why := "denied", a.Reason
		if a.Allowed {
			result, why = "allowed", a.Rule
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", a.Time.Format(time.RFC3339Nano), a.Method, a.Destination, result, why, a.BytesOut, a.BytesIn)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(m.Egress) == 0 {
		fmt.Fprintf(&w, "run %s made no egress attempts\n", m.RunID)
	}
	if m.EgressDropped > 0 {
		fmt.Fprintf(&w, "%d more attempts were not kept (at most %d per run)\n", m.EgressDropped, runmanifest.MaxEgress)
	}
	_, err := out.Write(w.Bytes())
	return err
}

func newCmdRunsQuery(g *globals) *cobra.Command {
	var (
		sf          stateFlags
		q           runmanifest.Query
		runnerAlias string
	)
	cmd := &cobra.Command{
		Use: "query --template ID | --runner-image DIGEST | --runner-binary SHA256 | --policy REV | --secret-version V |" +
			" --generation ID | --node-image ID | --node ID | --runtime-class C | --package NAME@VERSION",
		Short: "List the runs that used an artifact, or whose template, runner or control plane contains a package (one run id per line)",
		Long: `Query lists the runs matching every criterion given, each an exact identity as the run
manifest records it. The runner has two: --runner-image is the digest of the runner IMAGE
the generation pins (runner_image_digest; --runner is its older name), --runner-binary the
sha256 of the runner BINARY that image carries (runner_binary_sha256, as pool status and
proof evidence show it). --secret-version matches the pinned secret version with its
version (vault://kv/agents/token#3). --policy matches policy_revision: the generation's
policy pin, or the config repository commit whose verification policy the runtime used.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runnerAlias != "" {
				if q.RunnerImage != "" {
					return usage(errors.New("--runner is --runner-image: give one"))
				}
				q.RunnerImage = runnerAlias
			}
			if q == (runmanifest.Query{}) {
				return usage(errors.New("give at least one of --template, --runner-image, --runner-binary, --policy, --secret-version, --generation, --node-image, --node, --runtime-class, --package"))
			}
			s, err := sf.open(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			ids, err := s.Query(cmd.Context(), q)
			if err != nil {
				return usage(err)
			}
			if g.json() {
				if ids == nil {
					ids = []string{}
				}
				return g.printJSON(map[string]any{"runs": ids})
			}
			for _, id := range ids {
				fmt.Fprintln(g.stdout, id)
			}
			return nil
		},
	}
	sf.add(cmd)
	cmd.Flags().StringVar(&q.Template, "template", "", "workspace template id (its digest)")
	cmd.Flags().StringVar(&q.RunnerImage, "runner-image", "", "digest of the runner IMAGE (runner_image_digest)")
	cmd.Flags().StringVar(&runnerAlias, "runner", "", "same as --runner-image (the runner IMAGE's digest)")
	cmd.Flags().StringVar(&q.RunnerBinary, "runner-binary", "", "sha256 of the runner BINARY (runner_binary_sha256)")
	cmd.Flags().StringVar(&q.Policy, "policy", "", "policy revision (here a revision, not a VerificationPolicy file)")
	cmd.Flags().StringVar(&q.SecretVersion, "secret-version", "", "pinned secret version, its version included (PATH#VERSION)")
	cmd.Flags().StringVar(&q.Generation, "generation", "", "generation id")
	cmd.Flags().StringVar(&q.NodeImage, "node-image", "", "node image id")
	cmd.Flags().StringVar(&q.Node, "node", "", "node id (node_id: the host or Kubernetes node the sandbox ran on)")
	cmd.Flags().StringVar(&q.RuntimeClass, "runtime-class", "", "runtime class (runtime_class)")
	cmd.Flags().StringVar(&q.Package, "package", "", "NAME@VERSION in the SBOM of the run's template, runner or control-plane image (a Go module: github.com/spf13/cobra@v1.10.2)")
	cmd.Flags().IntVar(&q.Limit, "limit", 0, "at most this many run ids (0: all)")
	return cmd
}

func newCmdRunsRelated(g *globals) *cobra.Command {
	var (
		sf    stateFlags
		limit int
	)
	cmd := &cobra.Command{
		Use:   "related RUN",
		Short: "The other runs that shared a run's node, template, runtime class or policy revision",
		Long: `Related reads the run's manifest, then the runs recorded with the same node (node_id),
workspace template, runtime class and policy revision, one query each on the store's indexes.
An identity the run did not record is said to be unrecorded, not matched against others' empty
ones. At most --limit runs are listed per identity (more: says there are more).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := sf.open(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			m, out, err := runs.Related(cmd.Context(), s, args[0], limit)
			if errors.Is(err, runs.ErrNotFound) {
				return failed(err)
			}
			if err != nil {
				return err
			}
			if g.json() {
				return g.printJSON(map[string]any{"run": m.RunID, "related": out})
			}
			for _, r := range out {
				switch {
				case r.Value == "":
					fmt.Fprintf(g.stdout, "%s: not recorded for %s\n", r.Shared, m.RunID)
				case len(r.Runs) == 0:
					fmt.Fprintf(g.stdout, "%s %s: no other run\n", r.Shared, r.Value)
				default:
					more := ""
					if r.More {
						more = " (and more)"
					}
					fmt.Fprintf(g.stdout, "%s %s: %d other runs%s: %s\n", r.Shared, r.Value, len(r.Runs), more, strings.Join(r.Runs, " "))
				}
			}
			return nil
		},
	}
	sf.add(cmd)
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many runs per identity (0: all)")
	return cmd
}

// printFence writes runs show --fence.
func printFence(g *globals, m *runmanifest.Manifest) error {
	v := runmanifest.FencingOf(m, time.Now())
	if g.json() {
		return g.printJSON(v)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "run %s (%s): owned by allocation attempt %d, sandbox %s\n", v.RunID, v.Status, v.AllocationAttempt, v.SandboxID)
	for _, f := range v.Fences {
		fmt.Fprintf(&b, "  fenced: attempt %d, sandbox %s at %s: %s\n", f.AllocationAttempt, f.SandboxID, f.FencedAt.Format(time.RFC3339Nano), f.Reason)
	}
	for _, c := range v.Credentials {
		fmt.Fprintf(&b, "  credential %s issued %s expires %s: %s", c.Fingerprint, c.IssuedAt.Format(time.RFC3339), c.ExpiresAt.Format(time.RFC3339), c.Standing)
		if c.RevokedAt != nil {
			fmt.Fprintf(&b, " at %s", c.RevokedAt.Format(time.RFC3339Nano))
		}
		if c.Renews != "" {
			fmt.Fprintf(&b, " (renews %s)", c.Renews)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "can an earlier attempt still route or mint credentials? %s\n", v.Verdict)
	_, err := io.WriteString(g.stdout, b.String())
	return err
}
