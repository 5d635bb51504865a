package serve_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/release"
	"github.com/slipway-dev/slipway/testharness/registrytest"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

// Serve finalises, when it starts, the runs an earlier runtime left open
// whose sandboxes are gone, and only those: a run whose sandbox still runs
// stays open until Serve stops, which deletes the sandbox and finalises
// the run. (TestRuntimeKillAndRestart in cmd/slipway/cli kills a real
// runtime process; here the earlier runtime's sandbox outlives it, which
// only a runtime in the same process can arrange.)
const apiToken = "test-token-0123456789abcdef"

func TestServeFinalisesRunsWithoutSandboxes(t *testing.T) {
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
	t.Cleanup(func() { // whatever a failure left running
		if be, err := local.New(sandboxes); err == nil {
			all, _ := be.List(ctx, sandbox.Filter{})
			for _, s := range all {
				_ = be.Delete(ctx, s.ID)
			}
			be.Close()
		}
	})

	// The earlier runtime: one claimed sandbox still running (r-alive), one
	// run whose sandbox is gone (r-lost), one finished run (r-done).
	be, err := local.New(sandboxes)
	if err != nil {
		t.Fatal(err)
	}
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	d := runtimetest.Desired("rev-1", "agents", 1, w.Generation(t, "agents", nil, ""))
	if rep := warm.Reconcile(ctx, d); len(rep.Errors) > 0 {
		t.Fatal(rep.Errors)
	}
	alive, _, err := warm.Claim(ctx, d, "agents", "r-alive")
	if err != nil {
		t.Fatal(err)
	}
	store, err := runs.OpenSQLite(ctx, filepath.Join(state, runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	awakened := time.Now().Add(-time.Minute).UTC()
	for _, m := range []*runmanifest.Manifest{
		{RunID: "r-alive", SandboxID: alive.ID, Pool: "agents", AllocationAttempt: 1},
		{RunID: "r-lost", SandboxID: "sb-gone", Pool: "agents", Tenant: "acme", AllocationAttempt: 2, Status: runmanifest.StatusRunning,
			Lifecycle: runmanifest.Lifecycle{RunnerAwakened: awakened}},
		{RunID: "r-done", SandboxID: "sb-done", Pool: "agents", AllocationAttempt: 1},
	} {
		if err := store.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	doneAt := time.Now().Add(-time.Second).UTC()
	if err := store.Update(ctx, "r-done", func(m *runmanifest.Manifest) error {
		m.Status, m.Lifecycle.ResourcesReleased = runmanifest.StatusCompleted, doneAt
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	store.Close()
	be.Close() // the sandbox runs on: this process lives

	var log serveLog
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	ready := make(chan string, 1)
	served := make(chan error, 1)
	started := time.Now()
	go func() {
		served <- serve.Run(sctx, serve.Config{Repo: repo, State: state, Listen: "127.0.0.1:0", Token: apiToken, Log: &log, Verify: runtime.Verify{Skip: true}},
			func(addr string) { ready <- addr })
	}()
	var c *runtimeapi.Client
	select {
	case a := <-ready:
		if c, err = runtimeapi.NewClient("http://"+a, apiToken); err != nil {
			t.Fatal(err)
		}
	case err := <-served:
		t.Fatalf("Serve: %v\n%s", err, log.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("Serve did not start:\n%s", log.String())
	}
	serving := time.Now()
	if !strings.Contains(log.String(), "finalised 1 open runs of an earlier run") {
		t.Errorf("log:\n%s", log.String())
	}
	m, err := c.Run(ctx, "r-lost")
	if err != nil {
		t.Fatal(err)
	}
	rr := m.Lifecycle.ResourcesReleased
	if m.Status != runmanifest.StatusFailed || rr.Before(started) || rr.After(serving) {
		t.Errorf("r-lost: %s, resources released %v; want failed, released between %v and %v", m.Status, rr, started, serving)
	}
	if m.Tenant != "acme" || m.AllocationAttempt != 2 || m.SandboxID != "sb-gone" || !m.Lifecycle.RunnerAwakened.Equal(awakened) || m.ExitCode != nil {
		t.Errorf("r-lost lost what it recorded: %+v", m)
	}
	if m, err := c.Run(ctx, "r-alive"); err != nil || m.Status != runmanifest.StatusGranted || !m.Lifecycle.ResourcesReleased.IsZero() {
		t.Errorf("r-alive, whose sandbox runs: %+v, %v; want it open", m, err)
	}
	if m, err := c.Run(ctx, "r-done"); err != nil || m.Status != runmanifest.StatusCompleted || !m.Lifecycle.ResourcesReleased.Equal(doneAt) {
		t.Errorf("r-done: %+v, %v; want it as it was", m, err)
	}

	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not stop")
	}
	be, err = local.New(sandboxes)
	if err != nil {
		t.Fatal(err)
	}
	all, err := be.List(ctx, sandbox.Filter{})
	be.Close()
	if err != nil || len(all) != 0 {
		t.Errorf("sandboxes after Serve stopped: %d, %v", len(all), err)
	}
	store, err = runs.OpenSQLite(ctx, filepath.Join(state, runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if open, err := store.Open(ctx); err != nil || len(open) != 0 {
		t.Errorf("open runs after Serve stopped: %v, %v", open, err)
	}
	if m, err := store.Get(ctx, "r-alive"); err != nil || m.Status != runmanifest.StatusFailed || m.Lifecycle.ResourcesReleased.Before(serving) {
		t.Errorf("r-alive after Serve stopped: %+v, %v", m, err)
	}
	if !strings.Contains(log.String(), "finalised 1 open runs as failed: the runtime stopped") {
		t.Errorf("log:\n%s", log.String())
	}
}

// serveLog is a log written by Serve's goroutines and read by the test.
type serveLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *serveLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *serveLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
