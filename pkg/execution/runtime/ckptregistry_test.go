package runtime_test

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// With a checkpoint repository, a suspend publishes the run's checkpoint
// to the registry (go-containerregistry's, in-process) by digest, signed
// and attested with the runtime's key; a resume on a runtime whose store
// lacks it (here: the local copy collected) pulls it from the registry,
// verified before anything is written, and restores every file.
func TestCheckpointPushedAndResumedFromRegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/slipway/checkpoints"
	w := newWarmWorld(t)
	f := newCkptRig(t, w.desired(t, "rev-1", 0, w.generation(t, nil)), func(c *runtime.Checkpoints) { c.Repository = repo })
	ctx := context.Background()

	gr, err := f.rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	execOut(t, f.rt, gr, fillWorkspace)
	want := execOut(t, f.rt, gr, hashWorkspace)
	cp, err := f.rt.Suspend(ctx, gr.RunID, runtime.CheckpointRequest{Token: gr.Token, EventSeq: 3})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewDigest(repo + "@" + cp.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sign.Verify(ctx, ref, f.cps.Verifier, sign.WithOfflineNoTlog()); err != nil {
		t.Fatalf("the published checkpoint's signature: %v", err)
	}
	if av, err := sign.VerifyAttestations(ctx, ref, f.cps.Verifier, sign.WithOfflineNoTlog()); err != nil || len(av.Predicate("https://slipway.dev/checkpoint/v1")) != 1 {
		t.Fatalf("the published checkpoint's attestation: %+v, %v", av, err)
	}

	// The local copy goes (as on a host that never held it).
	if got, err := f.cps.Store.Collect(time.Now().Add(time.Hour), nil, false); err != nil || len(got.Deleted) != 1 || f.cps.Store.Has(cp.Digest) {
		t.Fatalf("dropping the local copy: %+v, %v", got, err)
	}
	g, err := f.rt.Resume(ctx, gr.RunID, gr.Token)
	if err != nil {
		t.Fatal(err)
	}
	if got := execOut(t, f.rt, g, hashWorkspace); got != want {
		t.Fatalf("workspace resumed from the registry:\n%s\nwant:\n%s", got, want)
	}
	if !f.cps.Store.Has(cp.Digest) || !strings.Contains(f.log.String(), "pulled from "+ref.String()+", verified") {
		t.Errorf("the resume did not pull %s from the registry; log:\n%s", ref, f.log.String())
	}
	d, err := f.rt.Durable(ctx, gr.RunID)
	if err != nil || d.LastRestore == nil || d.LastRestore.Checkpoint != cp.Digest || d.LastRestore.Into != g.SandboxID {
		t.Fatalf("durable after the resume: %+v, %v", d, err)
	}
}
