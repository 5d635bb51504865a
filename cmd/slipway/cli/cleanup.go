package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
)

// NewCmdCleanup groups the cleanup reconciler's views.
func NewCmdCleanup(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "cleanup", Short: "What cleanup remains, and what the reconciler did"}
	cmd.AddCommand(newCmdCleanupList(g))
	return cmd
}

func newCmdCleanupList(g *globals) *cobra.Command {
	var (
		state  string
		recent int
		db     dbFlags
	)
	cmd := &cobra.Command{
		Use:   "list --state DIR | --db postgres://...",
		Short: "List the cleanup that remains (unknown, pending) and recent actions",
		Long: `List reads the cleanup reconciler's records directly, with the runtime running or not: from
DIR/` + reconcile.RecordsFile + ` (--state), or from the PostgreSQL database runtimes started with
--db share (--db, --db-file). It shows the cleanup that remains (unknown: an action failed or timed
out, with its owner, deadline, attempts and last error; pending: a candidate waiting out its
grace), then the most recent actions (done, resolved, kept by the fence).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dsn, err := db.resolveOptional()
			if err != nil {
				return err
			}
			var rs *reconcile.Records
			switch {
			case state != "" && dsn != "":
				return usage(errors.New("--state and --db name two places: give one"))
			case dsn != "":
				if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
					return usage(errors.New("--db: want the runtimes' postgres:// database (a runtime on SQLite keeps its records in --state)"))
				}
				rs, err = reconcile.OpenRecordsPostgres(cmd.Context(), dsn)
			case state != "":
				rs, err = reconcile.ReadRecords(cmd.Context(), filepath.Join(state, reconcile.RecordsFile))
			default:
				return usage(errors.New("--state DIR or --db is required"))
			}
			if err != nil {
				return err
			}
			defer rs.Close()
			v, err := reconcile.View(cmd.Context(), rs, recent)
			if err != nil {
				return err
			}
			if g.json() {
				return g.printJSON(v)
			}
			w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "REMAINING: %d\n", len(v.Remaining))
			if len(v.Remaining) > 0 {
				fmt.Fprintln(w, "STATE\tKIND\tRESOURCE\tPOOL\tRUN\tLEASE\tACTION\tATTEMPTS\tOWNER\tDEADLINE\tLAST ERROR OR NOTE")
				for _, r := range v.Remaining {
					note := r.LastError
					if note == "" {
						note = r.Outcome
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.State, r.Kind, r.Resource, dash(r.Pool), dash(r.RunID),
						dash(r.LeaseVersion), r.Action, r.Attempts, r.Owner, when(r.Deadline), dash(note))
				}
			}
			fmt.Fprintf(w, "RECENT: %d\n", len(v.Recent))
			if len(v.Recent) > 0 {
				fmt.Fprintln(w, "STATE\tKIND\tRESOURCE\tPOOL\tRUN\tLEASE\tACTION\tATTEMPTS\tUPDATED\tOUTCOME")
				for _, r := range v.Recent {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.State, r.Kind, r.Resource, dash(r.Pool), dash(r.RunID),
						dash(r.LeaseVersion), r.Action, r.Attempts, when(r.Updated), dash(r.Outcome))
				}
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "the runtime's state directory")
	db.add(cmd.Flags(), "the runtimes' shared database")
	cmd.Flags().IntVar(&recent, "recent", 20, "how many recent actions to show")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
