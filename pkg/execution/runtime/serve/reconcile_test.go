package serve_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/release"
	"github.com/slipway-dev/slipway/testharness/registrytest"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

// TestServeReconcilesWhileRunning: the cleanup reconciler runs beside a
// serving runtime, not only at its start. A sandbox whose run ends while
// the runtime serves (its run finalised behind the runtime's back, its
// sandbox left: a leaked lease) and one owned by a run never recorded are
// deleted within a few intervals; GET /v1/cleanup and the metrics show it;
// a live claim's sandbox stays.
func TestServeReconcilesWhileRunning(t *testing.T) {
	w := runtimetest.New(t, registrytest.NewInProcess(t))
	ctx := context.Background()
	repo := filepath.Join(t.TempDir(), "config.git")
	if err := gitops.InitBare(repo, "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := release.InitConfig(ctx, repo, "main", "agents", nil, gitops.Signature{}); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	sandboxes := filepath.Join(state, "sandboxes")
	t.Cleanup(func() {
		if be, err := local.New(sandboxes); err == nil {
			all, _ := be.List(ctx, sandbox.Filter{})
			for _, s := range all {
				_ = be.Delete(ctx, s.ID)
			}
			be.Close()
		}
	})
	be, err := local.New(sandboxes)
	if err != nil {
		t.Fatal(err)
	}
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	d := runtimetest.Desired("rev-1", "agents", 3, w.Generation(t, "agents", nil, ""))
	if rep := warm.Reconcile(ctx, d); len(rep.Errors) > 0 {
		t.Fatal(rep.Errors)
	}
	var sbs []*sandbox.Sandbox
	for _, owner := range []string{"r-live", "r-ending", "r-ghost"} {
		s, _, err := warm.Claim(ctx, d, "agents", owner)
		if err != nil {
			t.Fatal(err)
		}
		sbs = append(sbs, s)
	}
	live, ending, ghost := sbs[0], sbs[1], sbs[2]
	store, err := runs.OpenSQLite(ctx, filepath.Join(state, runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, m := range []*runmanifest.Manifest{
		{RunID: "r-live", SandboxID: live.ID, Pool: "agents", AllocationAttempt: 1},
		{RunID: "r-ending", SandboxID: ending.ID, Pool: "agents", AllocationAttempt: 1},
	} {
		if err := store.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	be.Close() // the sandboxes run on: this process lives

	var log serveLog
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	ready := make(chan string, 1)
	served := make(chan error, 1)
	go func() {
		served <- serve.Run(sctx, serve.Config{Repo: repo, State: state, Listen: "127.0.0.1:0", Token: apiToken, Log: &log,
			Verify: runtime.Verify{Skip: true}, ReconcileInterval: 200 * time.Millisecond}, func(addr string) { ready <- addr })
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-served:
		t.Fatalf("Serve: %v\n%s", err, log.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("Serve did not start:\n%s", log.String())
	}
	get := func(path string) string {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}

	// the run ends behind the runtime's back: its lease is left
	time.Sleep(500 * time.Millisecond)
	if err := store.Update(ctx, "r-ending", func(m *runmanifest.Manifest) error { m.Status = runmanifest.StatusReleased; return nil }); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(reconcile.DefaultGrace + 30*time.Second)
	var v reconcile.Remaining
	for {
		v = reconcile.Remaining{}
		if err := json.Unmarshal([]byte(get("/v1/cleanup")), &v); err != nil {
			t.Fatal(err)
		}
		done := map[string]string{}
		for _, r := range v.Recent {
			if r.State == reconcile.StateDone {
				done[r.Resource] = r.Kind
			}
		}
		if done[ending.ID] == reconcile.KindLeaseTerminal && done[ghost.ID] == reconcile.KindNoLease {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not cleaned: %+v\n%s", v, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(get("/metrics"), `slipway_orphan_resource_count{pool="agents"}`) {
		t.Errorf("no orphan_resource_count in /metrics")
	}
	if m, err := store.Get(ctx, "r-live"); err != nil || m.Status.Final() {
		t.Errorf("r-live: %+v %v", m, err)
	}
	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not stop")
	}
	// r-live's sandbox ran until Serve stopped (Serve's stop deletes it, and
	// finalises its run as failed): the reconciler never took it
	for _, r := range append(v.Recent, v.Remaining...) {
		if r.Resource == live.ID {
			t.Errorf("the live sandbox was a candidate: %+v", r)
		}
	}
}
