//go:build linux

package kubesandbox_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// TestReconcileOnNode: the cleanup reconciler on a real node, with
// agent-sandbox's controller and the kubelet. Two claims get warm members
// (running pods); the run of one is recorded open, the other's never is
// (its worker died after the claim). The reconciler waits out the grace,
// then deletes the leaked claim with its Sandbox and its pod, which the
// kubelet stops; the live claim, its pod and the warm pool are left, and
// a pass after finds nothing.
func TestReconcileOnNode(t *testing.T) {
	n := startNode(t, "reconcile")
	g := n.generation(t, nil)
	n.desire(t, 2)
	ctx := context.Background()
	be, err := kubesandbox.New(n.c.Config(), n.ns, kubesandbox.WithReadyTimeout(90*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	live, err := be.Create(ctx, specOf(t, n, g, "r-live"))
	if err != nil {
		t.Fatal(err)
	}
	leaked, err := be.Create(ctx, specOf(t, n, g, "r-ghost"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	store, err := runs.OpenSQLite(ctx, filepath.Join(dir, runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Create(ctx, &runmanifest.Manifest{RunID: "r-live", Pool: n.pool, SandboxID: live.ID, AllocationAttempt: 1, Status: runmanifest.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	records, err := reconcile.OpenRecords(ctx, filepath.Join(dir, reconcile.RecordsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer records.Close()
	r, err := reconcile.New(reconcile.Config{Backend: be, Runs: store, Records: records, Owner: "node-test/127.0.0.1:0",
		Warm: func() (map[string]map[string]bool, bool) {
			return map[string]map[string]bool{n.pool: {g.ID: true}}, true
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Grace: time.Second, ActionTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pending != 1 || rep.Cleaned != 0 || rep.Live != 1 {
		t.Fatalf("pass 1: %+v", rep)
	}
	time.Sleep(1100 * time.Millisecond)
	if rep, err = r.Pass(ctx); err != nil || rep.Cleaned != 1 || rep.Unknown != 0 {
		t.Fatalf("pass 2: %+v %v; controller log:\n%s", rep, err, n.c.Log("agent-sandbox-controller"))
	}
	gone(t, n, claimsGVR, kubesandbox.ClaimName("r-ghost"))
	gone(t, n, sandboxesGVR, leaked.ID)
	gone(t, n, podsGVR, leaked.ID)
	left, err := be.List(ctx, sandbox.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].ID != live.ID || left[0].State != sandbox.StateRunning {
		t.Fatalf("left: %+v", left)
	}
	if rep, err = r.Pass(ctx); err != nil || len(rep.Found) != 0 {
		t.Fatalf("pass 3: %+v %v", rep, err)
	}
	_ = be.Delete(ctx, live.ID)
}
