package cli

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// TestGCSweepsCheckpoints: `slipway gc --runtime` deletes the runtime's
// checkpoints whose pool's restore window has closed, through the
// runtime's API, and never one inside the window or an open run's head.
// Two checkpoints of pool agents: one of a run that ended, one the head
// of a run still open in the runtime's run store. Inside the window (an
// hour) gc keeps both; once the window is shorter than their age (the
// pool's restoreWindow lowered to 1ms) a dry run lists the ended run's
// checkpoint only and deletes nothing; --delete then deletes it, and the
// open run's head is all that is left.
func TestGCSweepsCheckpoints(t *testing.T) {
	ctx := context.Background()
	g := newGCRig(t, "")
	st, store, v := g.st, g.store, g.v
	window, take := g.window, g.take
	ended, head := take("r-ended"), take("r-open")
	if err := store.Create(ctx, &runmanifest.Manifest{RunID: "r-open", Pool: "agents", Tenant: "acme", Generation: "g1",
		Status: runmanifest.StatusRunning, WorkspaceCheckpointID: head}); err != nil {
		t.Fatal(err)
	}
	gc := func(args ...string) result {
		t.Helper()
		r := run(t, "", append([]string{"gc", "--runtime", g.url, "--token-file", g.tokenFile}, args...)...)
		if r.code != 0 {
			t.Fatalf("gc %v: %+v", args, r)
		}
		return r
	}

	// Inside the window: nothing is a candidate, not even with --delete.
	if r := gc("--delete"); strings.Contains(r.stdout, "deleted checkpoint") || !strings.Contains(r.stdout, "kept 2 checkpoints") {
		t.Fatalf("gc inside the restore window:\n%s", r.stdout)
	}
	if all, _ := st.List(); len(all) != 2 {
		t.Fatalf("checkpoints after gc inside the window: %d, want 2", len(all))
	}

	// The window closes on both; the open run's head stays.
	window(time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	r := gc()
	if !strings.Contains(r.stdout, "would delete checkpoint "+ended+" of run r-ended (pool agents") ||
		strings.Contains(r.stdout, head) || !strings.Contains(r.stdout, "kept 1 checkpoints") {
		t.Fatalf("gc dry run after the window:\n%s", r.stdout)
	}
	if all, _ := st.List(); len(all) != 2 {
		t.Fatalf("a dry run deleted checkpoints: %d left, want 2", len(all))
	}
	r = gc("--delete", "-o", "json")
	var rep gcReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Checkpoints == nil {
		t.Fatalf("gc -o json: %v\n%s", err, r.stdout)
	}
	sw := rep.Checkpoints
	if rep.GCReport != nil || sw.DryRun || len(sw.Deleted) != 1 || sw.Deleted[0].Checkpoint != ended || sw.Deleted[0].RunID != "r-ended" ||
		sw.Kept != 1 || sw.Blobs == 0 || !sw.Deleted[0].WindowClosed.Equal(sw.Deleted[0].Created.Add(time.Millisecond)) || sw.At.Before(sw.Deleted[0].WindowClosed) {
		t.Fatalf("gc --delete: %+v", sw)
	}
	all, err := st.List()
	if err != nil || len(all) != 1 || all[0].Digest != head {
		t.Fatalf("checkpoints after gc --delete: %+v, %v; want only the open run's head %s", all, err, head)
	}
	if _, err := checkpoint.Verify(ctx, st, head, v, checkpoint.Expect{Tenant: "acme", Generations: []string{"g1"}}); err != nil {
		t.Fatalf("the head after gc: %v", err)
	}

	if r := run(t, "", "gc"); r.code != 2 || !strings.Contains(r.stderr, "--repo or --runtime is required") {
		t.Errorf("gc with neither: %+v", r)
	}
}

// gcRig is a runtime serving its API (a local backend, a run store, a
// checkpoint store and key; a checkpoint repository when repo is set)
// whose desired state names pool agents with a restore window window
// sets.
type gcRig struct {
	st             *checkpoint.Store
	store          *runs.SQLite
	sv             signature.SignerVerifier
	v              signature.Verifier
	url, tokenFile string
	window         func(time.Duration)
	take           func(runID string) string
}

func newGCRig(t *testing.T, repo string) *gcRig {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	be, err := local.New(filepath.Join(dir, "sandboxes"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	store, err := runs.OpenSQLite(ctx, filepath.Join(dir, runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	priv, pub, err := sign.GenerateKeys([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	sv, _ := sign.LoadSigner(priv, []byte("pw"))
	v, _ := sign.LoadVerifier(pub)
	st, err := checkpoint.OpenStore(filepath.Join(dir, "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	var desired atomic.Pointer[runtime.Desired]
	window := func(d time.Duration) {
		desired.Store(&runtime.Desired{Revision: "rev", Pools: map[string]*runtime.PoolDesired{
			"agents": {Pool: &pool.Pool{Spec: pool.Spec{RestoreWindow: pool.Duration{Duration: d}}}, State: &pool.State{}},
		}})
	}
	window(time.Hour)
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return desired.Load(), time.Now() },
		runtime.NewWarm(be, runtime.NewRegistryArtifacts(filepath.Join(dir, "artifacts"))), store, time.Minute,
		runtime.WithLog(&strings.Builder{}), runtime.WithCheckpoints(runtime.Checkpoints{Store: st, Signer: sv, Verifier: v, Repository: repo}))
	t.Cleanup(func() { _ = rt.Close() })
	srv, err := runtime.NewServer(rt, nil, be, restartToken)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(restartToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	take := func(runID string) string {
		t.Helper()
		ws := filepath.Join(dir, "ws-"+runID)
		if err := os.MkdirAll(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "f.txt"), []byte(runID), 0o644); err != nil {
			t.Fatal(err)
		}
		cp, _, err := checkpoint.Create(ctx, st, checkpoint.Source{Dir: ws}, checkpoint.Meta{Tenant: "acme", Pool: "agents", RunID: runID,
			SandboxID: "sb-" + runID, Generation: "g1", TemplateID: "sha256:" + strings.Repeat("3", 64)}, checkpoint.WithSigner(sv))
		if err != nil {
			t.Fatal(err)
		}
		return cp.Digest
	}
	return &gcRig{st: st, store: store, sv: sv, v: v, url: hs.URL, tokenFile: tokenFile, window: window, take: take}
}

// TestGCSweepsPublishedCheckpoints: with a checkpoint repository
// (go-containerregistry's registry, in-process), `slipway gc --runtime`
// sweeps the published copies by the same rule. Inside the window it
// keeps both; after it, a dry run lists the ended run's published
// checkpoint and deletes nothing; --delete deletes it from the registry
// with its signature and attestation, and the open run's head stays
// there, still signed.
func TestGCSweepsPublishedCheckpoints(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repoName := strings.TrimPrefix(srv.URL, "http://") + "/slipway/checkpoints"
	repo, err := name.NewRepository(repoName)
	if err != nil {
		t.Fatal(err)
	}
	g := newGCRig(t, repoName)
	ended, head := g.take("r-ended"), g.take("r-open")
	for _, d := range []string{ended, head} {
		if _, err := checkpoint.Push(ctx, g.st, d, repo, g.sv); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.store.Create(ctx, &runmanifest.Manifest{RunID: "r-open", Pool: "agents", Tenant: "acme", Generation: "g1",
		Status: runmanifest.StatusRunning, WorkspaceCheckpointID: head}); err != nil {
		t.Fatal(err)
	}
	gc := func(args ...string) string {
		t.Helper()
		r := run(t, "", append([]string{"gc", "--runtime", g.url, "--token-file", g.tokenFile}, args...)...)
		if r.code != 0 {
			t.Fatalf("gc %v: %+v", args, r)
		}
		return r.stdout
	}
	published := func(d string) bool {
		_, err := remote.Head(repo.Digest(d))
		return err == nil
	}

	if out := gc("--delete"); strings.Contains(out, "deleted published") || !strings.Contains(out, "kept 2 published checkpoints in "+repoName) {
		t.Fatalf("gc inside the restore window:\n%s", out)
	}
	g.window(time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	out := gc()
	if !strings.Contains(out, "would delete published checkpoint "+repo.Digest(ended).String()+" of run r-ended (pool agents") ||
		strings.Contains(out, "published checkpoint "+repo.Digest(head).String()) || !strings.Contains(out, "kept 1 published checkpoints") {
		t.Fatalf("gc dry run after the window:\n%s", out)
	}
	if !published(ended) || !published(head) {
		t.Fatal("a dry run deleted from the registry")
	}
	r := run(t, "", "gc", "--runtime", g.url, "--token-file", g.tokenFile, "--delete", "-o", "json")
	var rep gcReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Checkpoints == nil {
		t.Fatalf("gc -o json: %v\n%s", err, r.stdout)
	}
	sw := rep.Checkpoints
	if sw.Repository != repoName || len(sw.Published) != 1 || sw.Published[0].Checkpoint != repo.Digest(ended).String() ||
		sw.Published[0].Signature == "" || sw.Published[0].Attestation == "" || sw.PublishedKept != 1 || len(sw.Deleted) != 1 {
		t.Fatalf("gc --delete: %+v", sw)
	}
	if published(ended) {
		t.Error("the ended run's checkpoint is still in the registry")
	}
	if _, err := sign.Verify(ctx, repo.Digest(ended), g.v, sign.WithOfflineNoTlog()); err == nil {
		t.Error("the ended run's checkpoint's signature still verifies")
	}
	if _, err := sign.Verify(ctx, repo.Digest(head), g.v, sign.WithOfflineNoTlog()); err != nil {
		t.Errorf("the open run's head in the registry: %v", err)
	}
}
