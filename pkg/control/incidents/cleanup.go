package incidents

import (
	"context"
	"fmt"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
)

// CleanupRecords lists the cleanup reconciler's records
// (reconcile.Records does, over a runtime's DIR/cleanup.db).
type CleanupRecords interface {
	Open(ctx context.Context) ([]reconcile.Record, error)
	Recent(ctx context.Context, n int) ([]reconcile.Record, error)
}

var _ CleanupRecords = (*reconcile.Records)(nil)

// recentCleanups bounds the closed records a report reads.
const recentCleanups = 200

// FromCleanup reads the reconciler's records: every cleanup whose outcome
// is unknown (a delete that timed out or failed: open, with its owner,
// deadline and attempts), and the recent ones that were unknown once and
// are resolved (confirmed).
func FromCleanup(rs CleanupRecords) Source {
	return covering{kinds: []Kind{CleanupUnknown}, SourceFunc: func(ctx context.Context) ([]Incident, error) {
		open, err := rs.Open(ctx)
		if err != nil {
			return nil, err
		}
		closed, err := rs.Recent(ctx, recentCleanups)
		if err != nil {
			return nil, err
		}
		var out []Incident
		for _, r := range append(open, closed...) {
			if r.State != reconcile.StateUnknown && r.State != reconcile.StateResolved {
				continue
			}
			out = append(out, cleanupIncident(r))
		}
		return out, nil
	}}
}

func cleanupIncident(r reconcile.Record) Incident {
	i := Incident{Kind: string(CleanupUnknown), Run: r.RunID, State: "cleanup " + r.State, Reason: r.Kind, Owner: r.Owner,
		Attempts: r.Attempts, At: r.First}
	i.Detail = fmt.Sprintf("%s %s", r.Action, r.Resource)
	add(&i, "cleanup record", "%d (%s of %s, pool %s)", r.ID, r.Kind, r.Resource, orDash(r.Pool))
	add(&i, "lease seen", "%s", orDash(r.LeaseVersion))
	add(&i, "first tried", "%s; last %s", r.First.UTC().Format(time.RFC3339), r.Updated.UTC().Format(time.RFC3339))
	if r.LastError != "" {
		add(&i, "last error", "%s", r.LastError)
	}
	if r.State == reconcile.StateResolved {
		i.Terminal = true
		i.Owner = ""
		add(&i, "outcome", "%s", orDash(r.Outcome))
		return i
	}
	if !r.Deadline.IsZero() {
		d := r.Deadline
		i.Deadline = &d
	}
	i.Next = fmt.Sprintf("%s retries it every pass; past the deadline, remove %s by hand and see it resolve (slipway cleanup list)", r.Owner, r.Resource)
	return i
}
