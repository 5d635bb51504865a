package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/control/incidents"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
)

// NewCmdIncidents lists, per incident kind, the jobs and runs that show it.
func NewCmdIncidents(g *globals) *cobra.Command {
	var db dbFlags
	var state string
	cmd := &cobra.Command{
		Use:   "incidents --db DSN [--state DIR]",
		Short: "List, per incident kind, the jobs and runs that show it, with their evidence",
		Long: `Incidents reads durable records only: the control plane's database (--db, sqlite:PATH or a
postgres:// URL) and, with --state, a runtime's run manifests (DIR/runs.db). For each incident
kind (agent hangs, worker crashes after create, credential expires, policy propagation lags,
artifact export fails, delete times out) it lists the jobs and runs that show it: state, reason,
owner and deadline while the outcome is not confirmed, attempts, receipts, the evidence and the
next action. It exits 0 whatever it finds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			s, err := openStore(cmd, &db)
			if err != nil {
				return err
			}
			defer s.Close()
			var rs incidents.RunLister
			sources := []incidents.Source{}
			if state != "" {
				file := filepath.Join(state, runs.StateFile)
				if _, err := os.Stat(file); err != nil {
					return usage(fmt.Errorf("--state %s: %w", state, err))
				}
				st, err := runs.OpenSQLite(ctx, file)
				if err != nil {
					return err
				}
				defer st.Close()
				rs = st
				sources = append(sources, incidents.FromRuns(st, nil))
				// the reconciler's records, when it has made any
				if _, err := os.Stat(filepath.Join(state, reconcile.RecordsFile)); err == nil {
					cr, err := reconcile.ReadRecords(ctx, filepath.Join(state, reconcile.RecordsFile))
					if err != nil {
						return err
					}
					defer cr.Close()
					sources = append(sources, incidents.FromCleanup(cr))
				}
			}
			sources = append(sources, incidents.FromControl(s, rs))
			r, err := incidents.Collect(ctx, sources...)
			if err != nil {
				return err
			}
			if g.json() {
				return g.printJSON(r)
			}
			printIncidents(g, r)
			return nil
		},
	}
	db.add(cmd.Flags(), "the control plane's database")
	cmd.Flags().StringVar(&state, "state", "", "a runtime's state directory (its run manifests)")
	return cmd
}

func printIncidents(g *globals, r *incidents.Report) {
	w := g.stdout
	for _, k := range r.Kinds {
		if !k.Sourced {
			fmt.Fprintf(w, "%s (not read): %s: no record of this kind was read (%s)\n", k.Kind, k.Title, unsourced(incidents.Kind(k.Kind)))
			continue
		}
		fmt.Fprintf(w, "%s (%d): %s\n", k.Kind, len(k.Incidents), k.Title)
		for _, i := range k.Incidents {
			who := ""
			if i.Job != "" {
				who = "job " + i.Job + " "
			}
			if i.Run != "" {
				who += "run " + i.Run + " "
			}
			status := "confirmed"
			if !i.Terminal {
				status = "OPEN"
				if i.Owner != "" {
					status += ", owner " + i.Owner
				}
				if i.Deadline != nil {
					status += ", by " + i.Deadline.UTC().Format(time.RFC3339)
				}
			} else if i.Owner != "" {
				status += ", owner " + i.Owner
			}
			fmt.Fprintf(w, "  %s%s (%s) [%s]\n", who, i.State, i.Reason, status)
			if i.Detail != "" {
				fmt.Fprintf(w, "    detail:   %s\n", i.Detail)
			}
			if i.Attempts > 0 {
				fmt.Fprintf(w, "    attempts: %d\n", i.Attempts)
			}
			for _, f := range i.Evidence {
				fmt.Fprintf(w, "    %s: %s\n", f.Name, f.Value)
			}
			for _, rc := range i.Receipts {
				fmt.Fprintf(w, "    receipt:  %s\n", rc)
			}
			if i.Next != "" {
				fmt.Fprintf(w, "    next:     %s\n", i.Next)
			}
		}
	}
	fmt.Fprintf(w, "open: %d\n", r.Open)
}

// unsourced says where a kind's records would come from.
func unsourced(k incidents.Kind) string {
	switch k {
	case incidents.CredentialExpiry:
		return "run manifests: give --state"
	case incidents.CleanupUnknown:
		return "the reconciler's records"
	}
	return "no source given"
}
