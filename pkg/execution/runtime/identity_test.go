package runtime_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// POST /v1/claims/{run}/identity relays what the claim's runner says now:
// the pinned binary's sha256 (as the manifest records it), the grant's
// generation and sandbox, and where the runner lives; an old token is
// fenced (409) and a released claim has none (404).
func TestClaimIdentity(t *testing.T) {
	w := newWarmWorld(t)
	ctx := context.Background()
	be := newLocalBackend(t)
	store := newStore(t)
	g1 := w.generation(t, nil)
	d := w.desired(t, "rev-1", 1, g1)
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute)
	defer rt.Close()
	srv, err := runtime.NewServer(rt, nil, be, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c, _ := runtimeapi.NewClient(hs.URL, apiToken)

	g, err := c.Claim(ctx, "agents", runtimeapi.ClaimBody{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Identity(ctx, g.RunID, g.Token)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Run(ctx, g.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if id.RunID != g.RunID || id.SandboxID != g.SandboxID || id.Generation != g1.ID || id.AllocationAttempt != 1 ||
		id.Runner.SandboxID != g.SandboxID || id.Runner.Generation != g1.ID || id.Runner.RunnerBinarySHA256 != m.RunnerBinarySHA256 ||
		id.RunnerPath != sandbox.RunnerPath || id.Runner.Pid == 0 {
		t.Fatalf("identity %+v\ngrant %+v\nmanifest runner %s", id, g, m.RunnerBinarySHA256)
	}
	var ae *runtimeapi.APIError
	if _, err := c.Identity(ctx, g.RunID, "not-the-token"); !errors.As(err, &ae) || ae.Status != 409 {
		t.Errorf("a wrong token: %v", err)
	}
	zero := 0
	if err := c.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g.Token, ExitCode: &zero}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Identity(ctx, g.RunID, g.Token); !errors.As(err, &ae) || ae.Status != 404 {
		t.Errorf("a released claim: %v", err)
	}
}
