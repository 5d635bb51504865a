package serve

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// listing is a recorded read of the cluster, replayed: the first read
// lists the claim and its Sandbox and, while it is under way, the claim is
// released; later reads list nothing. A fake, because the interleaving it
// stands for (a read of the API server that began before a release and
// returns after it) cannot be caused on demand on a real one; the real
// reads and deletions are in TestKubeCostBetweenSamples and
// kubesandbox's TestReleaseObserver.
type listing struct {
	mu      sync.Mutex
	reads   int
	objs    []sandbox.Object
	during  func() // the release landing during the first read
	stopped func() // after the third read
}

func (l *listing) DeleteObject(context.Context, sandbox.Object, bool) error {
	return errors.New("listing: the sampler deletes nothing")
}

func (l *listing) Objects(context.Context) ([]sandbox.Object, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	switch l.reads {
	case 1:
		l.during()
		return l.objs, nil
	case 3:
		l.stopped()
	}
	return nil, nil
}

// TestReleaseBeforeStaleRead: a claim released while a read of the
// cluster that still lists it is under way is recorded once, ended when
// its release saw it gone: the sampler neither reopens it nor ends it
// again when it later finds it gone.
func TestReleaseBeforeStaleRead(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	path := filepath.Join(t.TempDir(), cost.StateFile)
	ledger, err := cost.OpenLedger(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	rel := newReleases(ledger)
	created := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	claim := sandbox.Object{Kind: sandbox.KindClaim, Name: "sw-r-1", Owner: "r-1", Bound: "sb-1", Pool: "agents", Generation: "g-1", Created: created}
	sb := sandbox.Object{Kind: sandbox.KindSandbox, Name: "sb-1", Pool: "agents", Generation: "g-1", Controller: "SandboxClaim/sw-r-1", Created: created.Add(-time.Second)}
	var gone time.Time
	l := &listing{objs: []sandbox.Object{claim, sb}, stopped: cancel, during: func() {
		gone = time.Now()
		rel.observe(kubesandbox.Release{Claim: claim, Sandbox: sb, Gone: gone})
	}}
	observeCosts(ctx, l, ledger, rel, 10*time.Millisecond, io.Discard)
	if err := ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT state, run_id, start_ns, end_ns FROM intervals WHERE sandbox_id = 'sb-1'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			state, run string
			start      int64
			end        sql.NullInt64
		)
		if err := rows.Scan(&state, &run, &start, &end); err != nil {
			t.Fatal(err)
		}
		n++
		if state != string(cost.Active) || run != "r-1" || start != created.UnixNano() || !end.Valid || end.Int64 != gone.UnixNano() {
			t.Errorf("interval %s %s [%d, %+v], want active r-1 [%d, %d]", state, run, start, end, created.UnixNano(), gone.UnixNano())
		}
	}
	if err := rows.Err(); err != nil || n != 1 {
		t.Fatalf("%d intervals of sb-1 (%v), want 1", n, err)
	}
}
