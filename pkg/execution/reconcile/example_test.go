package reconcile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
)

// broker is a credential broker holding one credential of run r-1.
type broker struct{ live map[string]string }

func (b broker) Live() []reconcile.Credential {
	var out []reconcile.Credential
	for fp, run := range b.live {
		out = append(out, reconcile.Credential{Fingerprint: fp, RunID: run, ExpiresAt: time.Now().Add(time.Hour)})
	}
	return out
}

func (b broker) Revoke(fp string) { delete(b.live, fp) }

// A pass beside a runtime's state: run r-1 was released, and the broker
// still honours its credential, so the pass revokes it and records that;
// a second pass finds nothing to do.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "reconcile-example-")
	defer os.RemoveAll(dir)
	be, _ := local.New(filepath.Join(dir, "sandboxes"))
	defer be.Close()
	store, _ := runs.OpenSQLite(ctx, filepath.Join(dir, runs.StateFile))
	defer store.Close()
	records, _ := reconcile.OpenRecords(ctx, filepath.Join(dir, reconcile.RecordsFile))
	defer records.Close()
	_ = store.Create(ctx, &runmanifest.Manifest{RunID: "r-1", Pool: "agents"})
	_ = store.Update(ctx, "r-1", func(m *runmanifest.Manifest) error { m.Status = runmanifest.StatusReleased; return nil })

	b := broker{live: map[string]string{"sha256:" + fmt.Sprintf("%064d", 1): "r-1"}}
	r, err := reconcile.New(reconcile.Config{Backend: be, Runs: store, Records: records, Owner: "host/127.0.0.1:7070", Credentials: b})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 2 {
		rep, _ := r.Pass(ctx)
		fmt.Println(rep.Found, "cleaned:", rep.Cleaned)
	}
	v, _ := reconcile.View(ctx, records, 10)
	for _, rec := range v.Recent {
		fmt.Println(rec.Kind, rec.RunID, rec.Action, rec.State, rec.Outcome)
	}
	// Output:
	// map[credential:1] cleaned: 1
	// map[] cleaned: 0
	// credential r-1 revoke done revoked: its run r-1 no longer holds it
}
