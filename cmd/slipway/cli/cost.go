package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/tenancy"
	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
)

// NewCmdCost prints cost by state from a runtime's ledger.
func NewCmdCost(g *globals) *cobra.Command {
	var (
		rf           repoFlags
		state, run   string
		since, until string
		pricesFile   string
		db           dbFlags
	)
	cmd := &cobra.Command{
		Use:   "cost (--state DIR | --db postgres://...) (--pool P [--since T] [--until T] | --run R) [--repo URL | --prices FILE]",
		Short: "Resource time and cost per pool and state, or one run's cost terms, from the runtime's ledger",
		Long: `cost reads the ledger a runtime keeps in its state directory (` + cost.StateFile + `; on the
local backend from its own events, on Kubernetes from the cluster's timestamps): the time each
sandbox spent warm idle (a warm member ready and unclaimed), active (held by a run), in a proof
claim, retained (a Sandbox scaled to zero, Kubernetes), and the bytes its workspace kept on disk,
sampled (local backend). Runtime replicas on Kubernetes started with --db keep one ledger in
that PostgreSQL database (schema ` + cost.Schema + `, shared): read it with --db or --db-file;
the reports are the same.

With --pool: each state's time within [--since, --until) and its cost, storage in GiB-hours,
warm hits and cold starts, the warm-hit fraction and the unused warm minutes. --since and
--until take an RFC 3339 time or a duration back from now (24h; default: since 24h, until now).
With --run: the run's cost terms (active compute, the warm idle time of the member it took,
workspace storage) and the terms Slipway cannot price or see, named unknown.

Prices come from pricing.yaml at the head of --repo (or a file, --prices). A price
left out, or no price table, makes its term unknown, never zero: "known" is never a total
while anything is listed as unknown. Retained (stopped but kept) does not occur on the local
backend: its runtime deletes a sandbox when its claim ends.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			dsn, err := db.resolveOptional()
			if err != nil {
				return err
			}
			switch {
			case state != "" && dsn != "":
				return usage(errors.New("--state and --db name two places: give one"))
			case state == "" && dsn == "":
				return usage(errors.New("--state DIR or --db is required"))
			case dsn != "" && !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://"):
				return usage(errors.New("--db: want the runtimes' postgres:// database (a runtime on SQLite keeps its ledger in --state)"))
			case (rf.pool == "") == (run == ""):
				return usage(errors.New("give --pool P or --run R"))
			case rf.repo != "" && pricesFile != "":
				return usage(errors.New("give --repo or --prices, not both"))
			}
			prices, err := loadPrices(cmd, rf, pricesFile)
			if err != nil {
				return err
			}
			var recs *cost.Records
			if dsn != "" {
				recs, err = cost.OpenPostgres(ctx, dsn)
			} else {
				recs, err = cost.Open(ctx, filepath.Join(state, cost.StateFile))
			}
			if err != nil {
				return usage(err)
			}
			defer recs.Close()
			now := time.Now()
			if run != "" {
				m, err := runManifest(cmd, state, dsn, run)
				if err != nil {
					return err
				}
				rc, err := recs.Run(ctx, run, prices, m, now)
				if errors.Is(err, cost.ErrNotFound) {
					return failed(err)
				}
				if err != nil {
					return usage(err)
				}
				if g.json() {
					return g.printJSON(rc)
				}
				return printRunCost(g, rc)
			}
			w := cost.Window{}
			if w.Since, err = timeFlag("--since", since, now); err != nil {
				return err
			}
			if w.Until, err = timeFlag("--until", until, now); err != nil {
				return err
			}
			rep, err := recs.Pool(ctx, rf.pool, w, prices)
			if err != nil {
				return usage(err)
			}
			if g.json() {
				return g.printJSON(rep)
			}
			return printPoolCost(g, rep)
		},
	}
	rf.add(cmd)
	cmd.Flags().StringVar(&state, "state", "", "the runtime's state directory (the ledger is its "+cost.StateFile+")")
	cmd.Flags().StringVar(&run, "run", "", "a run id: print its cost terms")
	cmd.Flags().StringVar(&since, "since", "24h", "the window's start: an RFC 3339 time, or a duration back from now")
	cmd.Flags().StringVar(&until, "until", "0s", "the window's end: an RFC 3339 time, or a duration back from now")
	cmd.Flags().StringVar(&pricesFile, "prices", "", "a pricing.yaml file (instead of --repo's)")
	db.add(cmd.Flags(), "the runtimes' shared database")
	return cmd
}

// loadPrices reads pricing.yaml from the config repository's branch head or
// from a file; nil (every price unknown) when neither is given or the
// repository has none.
func loadPrices(cmd *cobra.Command, rf repoFlags, file string) (*tenancy.Pricing, error) {
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, usage(err)
		}
		p, err := tenancy.ParsePricing(file, b)
		if err != nil {
			return nil, usage(err)
		}
		return p, nil
	case rf.repo != "":
		repo, err := gitops.Open(cmd.Context(), rf.repo, rf.options()...)
		if err != nil {
			return nil, usage(err)
		}
		c, err := tenancy.Load(cmd.Context(), repo, rf.branch)
		if err != nil {
			return nil, usage(err)
		}
		return c.Prices(), nil
	}
	return nil, nil
}

// runManifest reads run's manifest from the state directory's store, or
// the shared database's (dsn), nil when there is none there.
func runManifest(cmd *cobra.Command, state, dsn, run string) (*runmanifest.Manifest, error) {
	var s runs.Store
	var err error
	if dsn != "" {
		s, err = runs.OpenPostgres(cmd.Context(), dsn)
	} else {
		file := filepath.Join(state, runs.StateFile)
		if _, err := os.Stat(file); err != nil {
			return nil, nil
		}
		s, err = runs.OpenSQLite(cmd.Context(), file)
	}
	if err != nil {
		return nil, usage(err)
	}
	defer s.Close()
	m, err := s.Get(cmd.Context(), run)
	if errors.Is(err, runs.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, usage(err)
	}
	return m, nil
}

// timeFlag reads an RFC 3339 time or a duration back from now.
func timeFlag(name, v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, usage(fmt.Errorf("%s %q: want an RFC 3339 time or a duration back from now (24h)", name, v))
	}
	return now.Add(-d), nil
}

func money(f *float64) string {
	if f == nil {
		return "unknown"
	}
	return fmt.Sprintf("%.6f", *f)
}

func printPoolCost(g *globals, rep *cost.PoolReport) error {
	price := "no price table"
	if rep.Currency != "" {
		price = rep.Currency
		if rep.PriceClass != "" {
			price += ", class " + rep.PriceClass
		} else {
			price += ", pool not priced"
		}
	}
	fmt.Fprintf(g.stdout, "pool %s from %s to %s (%s)\n", rep.Pool, rep.Since.UTC().Format(time.RFC3339), rep.Until.UTC().Format(time.RFC3339), price)
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATE\tTIME\tINTERVALS\tRATE/H\tCOST")
	for _, s := range rep.States {
		if s.NotApplicable != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\tnot applicable: %s\n", s.State, s.NotApplicable)
			continue
		}
		extra := ""
		if s.Open > 0 {
			extra += fmt.Sprintf(", %d open", s.Open)
		}
		if s.UnknownEnd > 0 {
			extra += fmt.Sprintf(", %d ended at an unknown time (up to %s more)", s.UnknownEnd, secs(s.UnknownSeconds))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d%s\t%s\t%s\n", s.State, secs(s.Seconds), s.Intervals, extra, money(s.RatePerHour), money(s.Cost))
	}
	st := rep.Storage
	fmt.Fprintf(tw, "storage\t%.6g GiB-h\t%d samples, peak %d bytes\t%s\t%s\n", st.GiBHours, st.Samples, st.PeakBytes, money(st.RatePerGiBHour), money(st.Cost))
	if err := tw.Flush(); err != nil {
		return err
	}
	frac := "none (no allocation in the window)"
	if rep.WarmHitFraction != nil {
		frac = fmt.Sprintf("%.3f", *rep.WarmHitFraction)
	}
	fmt.Fprintf(g.stdout, "warm hits %d, cold starts %d, warm-hit fraction %s; unused warm minutes %.1f\n", rep.WarmHits, rep.ColdStarts, frac, rep.UnusedWarmMinutes)
	fmt.Fprintf(g.stdout, "storage covers %s\n", st.Covers)
	return printKnown(g, rep.Known, rep.Currency, rep.Unknown)
}

func printRunCost(g *globals, rc *cost.RunCost) error {
	open := ""
	if rc.Open {
		open = ", still open (counted to now)"
	}
	attempts := "attempts"
	if rc.Attempts == 1 {
		attempts = "attempt"
	}
	fmt.Fprintf(g.stdout, "run %s, pool %s, %d allocation %s%s\n", rc.RunID, rc.Pool, rc.Attempts, attempts, open)
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TERM\tQUANTITY\tRATE\tCOST\tNOTE")
	for _, t := range rc.Terms {
		q := "unknown"
		if t.Quantity != nil {
			q = strings.TrimSpace(fmt.Sprintf("%.6g %s", *t.Quantity, t.Unit))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, q, money(t.Rate), money(t.Cost), t.Why)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printKnown(g, rc.Known, rc.Currency, rc.Unknown)
}

func printKnown(g *globals, known float64, currency string, unknown []string) error {
	if currency == "" {
		currency = "(no price table)"
	}
	if len(unknown) == 0 {
		_, err := fmt.Fprintf(g.stdout, "total %.6f %s\n", known, currency)
		return err
	}
	fmt.Fprintf(g.stdout, "known %.6f %s; not a total, unknown:\n", known, currency)
	for _, u := range unknown {
		fmt.Fprintf(g.stdout, "  - %s\n", u)
	}
	return nil
}
