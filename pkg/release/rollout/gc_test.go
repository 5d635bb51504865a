package rollout_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// TestGC: only the images of a retained generation past both windows, and
// pinned by no other generation, are listed; --delete deletes them with
// their signatures, takes the generation out of the state in one commit,
// and keeps everything else.
func TestGC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := sharedWorld(t)
	repoDir := filepath.Join(t.TempDir(), "config.git")
	if err := gitops.InitBare(repoDir, "main"); err != nil {
		t.Fatal(err)
	}
	pl := pool.Default("agents")
	pl.Spec.RollbackWindow = pool.Duration{Duration: time.Hour}
	pl.Spec.RestoreWindow = pool.Duration{Duration: 2 * time.Hour}
	pb, _ := pool.Marshal(pl)
	if _, err := release.InitConfig(ctx, repoDir, "main", "agents", map[string][]byte{pool.PoolFile("agents"): pb}, gitops.Signature{}); err != nil {
		t.Fatal(err)
	}
	sv := sharedSigner(t)
	g1 := w.Generation(t, "agents", nil, "")
	g2 := w.Generation(t, "agents", g1, "")
	for _, g := range []*generation.Generation{g1, g2} {
		signAll(t, sv, g)
	}
	for i, g := range []*generation.Generation{g1, g2} {
		if _, err := release.Promote(ctx, release.Promotion{Repo: repoDir, Generation: g, Activate: i == 0, SkipVerify: true}); err != nil {
			t.Fatal(err)
		}
	}
	// g2 active, g1 retained since t0 (as a rollout leaves them).
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	repo, err := gitops.Open(ctx, repoDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Update(ctx, gitops.Request{Branch: "main", Edit: func(tr *gitops.Tree) (*gitops.Commit, error) {
		st := pool.NewState("agents")
		st.Target = g2.ID
		st.Generations = []pool.GenState{{ID: g1.ID, Sequence: 1, State: pool.Retained, Since: t0}, {ID: g2.ID, Sequence: 2, State: pool.Active, Since: t0}}
		b, _ := pool.Marshal(st)
		return &gitops.Commit{Subject: "test: g1 retained"}, tr.WriteFile(pool.StateFile("agents"), b)
	}}); err != nil {
		t.Fatal(err)
	}

	gc := func(now time.Time, del bool) *rollout.GCReport {
		t.Helper()
		rep, err := rollout.GC(ctx, rollout.GCOptions{Repo: repo, Delete: del, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	// Inside the restore window (past the rollback window): nothing.
	if rep := gc(t0.Add(90*time.Minute), true); len(rep.Artifacts) != 0 || rep.Commit != "" || len(rep.Kept) != 1 {
		t.Fatalf("inside a window: %+v", rep)
	}
	// Past both: only g1's control plane; its runner and template are g2's too.
	rep := gc(t0.Add(3*time.Hour), false)
	if len(rep.Artifacts) != 1 || rep.Artifacts[0].Image != g1.Pins[generation.ControlPlane].Image || !rep.DryRun {
		t.Fatalf("dry run: %+v", rep)
	}
	if _, err := remote.Head(mustDigest(t, g1.Pins[generation.ControlPlane].Image)); err != nil {
		t.Fatalf("a dry run deleted: %v", err)
	}
	rep = gc(t0.Add(3*time.Hour), true)
	if len(rep.Artifacts) != 1 || rep.Artifacts[0].Deleted == nil || rep.Artifacts[0].Deleted.Signatures == "" || rep.Commit == "" || !slices.Equal(rep.Removed, []string{g1.ID}) {
		t.Fatalf("delete: %+v", rep)
	}
	if _, err := remote.Head(mustDigest(t, g1.Pins[generation.ControlPlane].Image)); err == nil {
		t.Error("g1's control plane is still in the registry")
	}
	for _, k := range []generation.Kind{generation.ControlPlane, generation.Runner, generation.WorkspaceTemplate} {
		d := mustDigest(t, g2.Pins[k].Image)
		if _, err := sign.Verify(ctx, d, sv, sign.WithOfflineNoTlog()); err != nil {
			t.Errorf("g2's %s lost its image or signature: %v", k, err)
		}
	}
	// Nothing left to collect.
	if rep := gc(t0.Add(4*time.Hour), true); len(rep.Artifacts) != 0 || rep.Commit != "" {
		t.Errorf("second gc: %+v", rep)
	}
}

func signAll(t *testing.T, sv signature.SignerVerifier, g *generation.Generation) {
	t.Helper()
	for _, p := range g.Pins {
		if _, err := sign.Sign(context.Background(), mustDigest(t, p.Image), sv, sign.WithOfflineNoTlog()); err != nil {
			t.Fatal(err)
		}
	}
}

func mustDigest(t *testing.T, ref string) name.Digest {
	t.Helper()
	d, err := name.NewDigest(ref)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
