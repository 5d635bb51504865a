package incidents

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
)

// recordList serves records as reconcile.Records would (its Open and
// Recent), from a list.
type recordList []reconcile.Record

func (l recordList) Open(context.Context) ([]reconcile.Record, error) {
	var out []reconcile.Record
	for _, r := range l {
		if r.Open() {
			out = append(out, r)
		}
	}
	return out, nil
}

func (l recordList) Recent(_ context.Context, n int) ([]reconcile.Record, error) {
	var out []reconcile.Record
	for _, r := range l {
		if !r.Open() && len(out) < n {
			out = append(out, r)
		}
	}
	return out, nil
}

// A cleanup whose outcome is unknown is an open incident with its owner,
// deadline and attempts; one resolved since is confirmed; pending and done
// ones are no incident.
func TestFromCleanup(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	rs := recordList{
		{ID: 1, Kind: "sandbox-no-lease", Resource: "sb-1", Pool: "agents", RunID: "r-1", LeaseVersion: "r-1@1", Action: "delete",
			State: reconcile.StateUnknown, LastError: "delete timed out after 30s", Owner: "host/127.0.0.1:7070", Deadline: t0.Add(10 * time.Minute),
			Attempts: 3, First: t0, Updated: t0.Add(time.Minute)},
		{ID: 2, Kind: "lease-terminal", Resource: "sb-2", RunID: "r-2", Action: "delete", State: reconcile.StateResolved, Outcome: "deleted on attempt 2",
			Owner: "host/127.0.0.1:7070", Attempts: 2, First: t0, Updated: t0},
		{ID: 3, Kind: "credential", Resource: "sha256:ab", Action: "revoke", State: reconcile.StatePending, Owner: "h", First: t0, Updated: t0},
		{ID: 4, Kind: "dead-sandbox", Resource: "sb-4", Action: "delete", State: reconcile.StateDone, Owner: "h", First: t0, Updated: t0},
	}
	r, err := Collect(context.Background(), FromCleanup(rs))
	if err != nil {
		t.Fatal(err)
	}
	var got []Incident
	for _, k := range r.Kinds {
		if Kind(k.Kind) == CleanupUnknown {
			if !k.Sourced {
				t.Fatal("delete_times_out is not marked as read")
			}
			got = k.Incidents
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d incidents, want 2: %+v", len(got), got)
	}
	var open, done *Incident
	for i := range got {
		if got[i].Terminal {
			done = &got[i]
		} else {
			open = &got[i]
		}
	}
	if open == nil || open.Run != "r-1" || open.Owner != "host/127.0.0.1:7070" || open.Deadline == nil || !open.Deadline.Equal(t0.Add(10*time.Minute)) ||
		open.Attempts != 3 || !strings.Contains(open.Next, "retries it every pass") {
		t.Fatalf("the unknown cleanup: %+v", open)
	}
	if done == nil || done.Run != "r-2" || done.Owner != "" || done.Deadline != nil {
		t.Fatalf("the resolved cleanup: %+v", done)
	}
}
