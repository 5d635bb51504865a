package runtime_test

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

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

// Retention in the checkpoint repository (go-containerregistry's registry,
// in-process): a checkpoint published there lives until its pool's restore
// window closes. Two released runs' checkpoints, one of them no longer in
// the local store (found through its signature tag, verified), and a
// suspended run's head, all pushed. A sweep a minute before the windows
// close deletes nothing there; a dry run a minute after lists the two
// released ones and deletes nothing; the sweep deletes them, each with its
// signature and attestation, from the registry first and then the store;
// the suspended run's head stays there past its own window, still signed,
// and the run resumes with its files.
func TestSweepDeletesPublishedCheckpoints(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/slipway/checkpoints"
	w := newWarmWorld(t)
	d := w.desired(t, "rev-1", 0, w.generation(t, nil))
	d.Pools["agents"].Pool.Spec.RestoreWindow.Duration = time.Hour
	f := newCkptRig(t, d, func(c *runtime.Checkpoints) { c.Repository = repo })
	ctx := context.Background()
	ref := func(digest string) name.Digest {
		r, err := name.NewDigest(repo + "@" + digest)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	published := func(digest string) bool {
		_, err := remote.Head(ref(digest))
		return err == nil
	}

	released := func(file string) string {
		t.Helper()
		g, err := f.rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		execOut(t, f.rt, g, "echo x > "+file)
		cp, err := f.rt.Checkpoint(ctx, g.RunID, runtime.CheckpointRequest{Token: g.Token})
		if err != nil {
			t.Fatal(err)
		}
		zero := 0
		if err := f.rt.Release(ctx, g.RunID, g.Token, &zero); err != nil {
			t.Fatal(err)
		}
		return cp.Digest
	}
	a, c := released("a.txt"), released("c.txt")
	all, err := f.cps.Store.List()
	if err != nil || len(all) != 2 {
		t.Fatalf("store: %+v, %v", all, err)
	}
	// a's local copy goes: the registry's is found by its tags alone.
	if got, err := f.cps.Store.Collect(time.Now().Add(time.Hour), map[string]bool{c: true}, false); err != nil || len(got.Deleted) != 1 {
		t.Fatalf("dropping a's local copy: %+v, %v", got, err)
	}
	b, err := f.rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	execOut(t, f.rt, b, "head -c 50000 /dev/urandom > b.bin")
	want := execOut(t, f.rt, b, "sha256sum b.bin")
	cpB, err := f.rt.Suspend(ctx, b.RunID, runtime.CheckpointRequest{Token: b.Token})
	if err != nil {
		t.Fatal(err)
	}
	earliest, latest := all[0].Predicate.Created, all[1].Predicate.Created // a's and c's, oldest first
	publishedOf := func(s *runtime.Swept) []string {
		var out []string
		for _, u := range s.Published.Deleted {
			out = append(out, u.Checkpoint)
		}
		slices.Sort(out)
		return out
	}
	both := []string{a, c}
	slices.Sort(both)

	// A minute before the first window closes: nothing.
	got, err := f.rt.SweepCheckpoints(ctx, earliest.Add(time.Hour-time.Minute), false)
	if err != nil || len(got.Published.Deleted) != 0 || got.Published.Kept != 3 || len(got.Deleted) != 0 {
		t.Fatalf("sweep inside the windows: %+v, %v", got, err)
	}
	after := latest.Add(time.Hour + time.Minute)
	got, err = f.rt.SweepCheckpoints(ctx, after, true)
	if err != nil || !slices.Equal(publishedOf(got), both) || !slices.Equal(got.Deleted, []string{c}) {
		t.Fatalf("dry run after the windows: %+v, %v; want %v listed in the registry, %s in the store", got, err, both, c)
	}
	for _, dg := range both {
		if !published(dg) {
			t.Fatalf("a dry run deleted %s from the registry", dg)
		}
	}
	got, err = f.rt.SweepCheckpoints(ctx, after, false)
	if err != nil || !slices.Equal(publishedOf(got), both) || got.Published.Kept != 1 || !slices.Equal(got.Deleted, []string{c}) {
		t.Fatalf("sweep after the windows: %+v, %v", got, err)
	}
	for _, u := range got.Published.Deleted {
		if u.Manifest == "" || u.Signature == "" || u.Attestation == "" || published(u.Checkpoint) {
			t.Errorf("%s: deleted %+v, still in the registry: %v", u.Checkpoint, u, published(u.Checkpoint))
		}
		if _, err := sign.Verify(ctx, ref(u.Checkpoint), f.cps.Verifier, sign.WithOfflineNoTlog()); err == nil {
			t.Errorf("%s: its signature still verifies", u.Checkpoint)
		}
	}
	// The suspended run's head, past its own window: kept, still signed.
	got, err = f.rt.SweepCheckpoints(ctx, cpB.Predicate.Created.Add(2*time.Hour), false)
	if err != nil || len(got.Published.Deleted) != 0 || got.Published.Kept != 1 || len(got.Deleted) != 0 {
		t.Fatalf("sweep past the head's window: %+v, %v", got, err)
	}
	if _, err := sign.Verify(ctx, ref(cpB.Digest), f.cps.Verifier, sign.WithOfflineNoTlog()); err != nil {
		t.Fatalf("the suspended run's head in the registry: %v", err)
	}
	g, err := f.rt.Resume(ctx, b.RunID, b.Token)
	if err != nil {
		t.Fatal(err)
	}
	if got := execOut(t, f.rt, g, "sha256sum b.bin"); got != want {
		t.Fatalf("b.bin after the sweeps and the resume: %q, want %q", got, want)
	}
}
