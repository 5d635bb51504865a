package runtime_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// streamed is the local backend offering checkpoints only in the stream
// form (sandbox.WorkspaceStreamer), as the Kubernetes backend does, so the
// runtime's stream path runs on one host with the runner's own tar and
// restore. hostile, when set, is what WorkspaceTar writes instead of the
// workspace: a sandbox whose runner lies, a fault the real runner cannot
// be made to cause (the one fake here).
type streamed struct {
	sandbox.Backend
	be      *local.Backend
	hostile []byte
}

var _ sandbox.WorkspaceStreamer = (*streamed)(nil)

func (s *streamed) Freeze(ctx context.Context, id string) (func() error, error) {
	return s.be.Freeze(ctx, id)
}

func (s *streamed) WorkspaceTar(ctx context.Context, id string, w io.Writer) error {
	if s.hostile != nil {
		_, err := w.Write(s.hostile)
		return err
	}
	dir, err := s.be.WorkspaceDir(ctx, id)
	if err != nil {
		return err
	}
	_, err = runner.WriteWorkspaceTar(dir, w, func(string, string) {})
	return err
}

func (s *streamed) RestoreTar(ctx context.Context, id string, r io.Reader) error {
	dir, err := s.be.WorkspaceDir(ctx, id)
	if err != nil {
		return err
	}
	_, err = runner.RestoreWorkspace(dir, r)
	return err
}

// The stream form of checkpoints on one host: a suspend copies the
// workspace out as a tar (whole: no layer reused), leaves no staging copy,
// and a resume restores every file as it was; the next checkpoints are
// incremental on the run's kept copy (one rewritten file, its mtime set
// back, is one new layer; an unchanged workspace none), and restore as
// they were; a sandbox whose tar tries to
// write outside the copy fails the checkpoint with rootfs's refusal,
// nothing is written beside the staging folder, and the sandbox goes on
// running, thawed.
func TestStreamCheckpointOnOneHost(t *testing.T) {
	w := newWarmWorld(t)
	g := w.generation(t, nil)
	ctx := context.Background()
	be, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store, err := runs.OpenSQLite(ctx, filepath.Join(t.TempDir(), runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	priv, pub, err := sign.GenerateKeys([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	sv, _ := sign.LoadSigner(priv, []byte("pw"))
	v, _ := sign.LoadVerifier(pub)
	st, err := checkpoint.OpenStore(filepath.Join(t.TempDir(), "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	sb := &streamed{Backend: be, be: be}
	d := w.desired(t, "rev-1", 0, g)
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, runtime.NewWarm(sb, runtime.NewRegistryArtifacts(t.TempDir())),
		store, time.Minute, runtime.WithCheckpoints(runtime.Checkpoints{Store: st, Signer: sv, Verifier: v}))
	t.Cleanup(func() {
		rt.Close()
		all, _ := be.List(ctx, sandbox.Filter{})
		for _, s := range all {
			_ = be.Delete(ctx, s.ID)
		}
		be.Close()
		store.Close()
	})

	gr, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	execOut(t, rt, gr, fillWorkspace)
	want := execOut(t, rt, gr, hashWorkspace)
	cp, err := rt.Suspend(ctx, gr.RunID, runtime.CheckpointRequest{Token: gr.Token})
	if err != nil {
		t.Fatal(err)
	}
	if cp.Predicate.Layers != 1 || cp.Predicate.Reused != 0 || cp.Frozen <= 0 {
		t.Fatalf("checkpoint %+v", cp)
	}
	staging := filepath.Join(st.Dir(), runtime.StagingDir)
	if left, _ := os.ReadDir(staging); len(left) != 0 {
		t.Fatalf("staging copies left behind: %v", left)
	}
	resumed, err := rt.Resume(ctx, gr.RunID, gr.Token)
	if err != nil {
		t.Fatal(err)
	}
	if got := execOut(t, rt, resumed, hashWorkspace); got != want {
		t.Fatalf("workspace after resume:\n%s\nwant:\n%s", got, want)
	}

	// The run's kept copy, made from the restored checkpoint, makes the
	// next checkpoint incremental: a file rewritten with the same size
	// and its mtime set back is the one change found (by its bytes), and
	// goes into the one new layer.
	kept := filepath.Join(staging, gr.RunID)
	if fi, err := os.Stat(kept); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the run's kept copy: %v %v, want a directory of mode 0700", fi, err)
	}
	execOut(t, rt, resumed, `set -e; touch -r data/blob.bin ref; head -c 300000 /dev/urandom > data/blob.bin; touch -r ref data/blob.bin; rm ref`)
	want = execOut(t, rt, resumed, hashWorkspace)
	cp2, err := rt.Checkpoint(ctx, gr.RunID, runtime.CheckpointRequest{Token: resumed.Token})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after one file changed: %d of %d layers new, %d tar entries, %d bytes", cp2.Predicate.Layers-cp2.Predicate.Reused,
		cp2.Predicate.Layers, cp2.Predicate.Entries, cp2.Predicate.Bytes)
	if p := cp2.Predicate; p.Parent != cp.Digest || p.Layers != 2 || p.Reused != 1 || p.Entries > 3 || p.Bytes >= cp.Predicate.Bytes {
		t.Fatalf("checkpoint after one file changed: %+v; want one new layer on %s holding data/ and data/blob.bin", p, cp.Digest)
	}
	// Nothing changed since: no new layer.
	cp3, err := rt.Suspend(ctx, gr.RunID, runtime.CheckpointRequest{Token: resumed.Token})
	if err != nil {
		t.Fatal(err)
	}
	if p := cp3.Predicate; p.Parent != cp2.Digest || p.Layers != 2 || p.Reused != 2 || p.Entries != 0 {
		t.Fatalf("checkpoint of an unchanged workspace: %+v, want both layers of %s reused", p, cp2.Digest)
	}
	if _, err := os.Stat(kept); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a suspended run's kept copy: %v, want it removed", err)
	}
	if resumed, err = rt.Resume(ctx, gr.RunID, resumed.Token); err != nil {
		t.Fatal(err)
	}
	if got := execOut(t, rt, resumed, hashWorkspace); got != want {
		t.Fatalf("workspace after the incremental checkpoints' resume:\n%s\nwant:\n%s", got, want)
	}
	// The sweeper removes the copy of a run this runtime does not hold,
	// never a held run's.
	if err := os.MkdirAll(filepath.Join(staging, "run-of-a-crash", "workspace"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.SweepCheckpoints(ctx, time.Now(), false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(staging, "run-of-a-crash")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the sweeper left a copy of a run not held: %v", err)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Fatalf("the sweeper removed a held run's kept copy: %v", err)
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "../../../escape", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2})
	_, _ = tw.Write([]byte("x\n"))
	_ = tw.Close()
	sb.hostile = buf.Bytes()
	_, err = rt.Checkpoint(ctx, gr.RunID, runtime.CheckpointRequest{Token: resumed.Token})
	if !errors.Is(err, rootfs.ErrUnsafeEntry) {
		t.Fatalf("checkpoint of a hostile tar: %v, want ErrUnsafeEntry", err)
	}
	if ents, _ := os.ReadDir(staging); len(ents) != 0 {
		t.Fatalf("the staging folder holds %v after a refused copy", ents)
	}
	// ../../../escape from staging/<run>/workspace is the store's folder.
	if _, err := os.Lstat(filepath.Join(st.Dir(), "escape")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the hostile tar wrote beside the staging folder: %v", err)
	}
	if fs, err := be.FreezerState(resumed.SandboxID); err != nil || fs != "THAWED" {
		t.Fatalf("freezer state after a refused copy %q %v, want THAWED", fs, err)
	}
	execOut(t, rt, resumed, "true")
	if err := rt.Release(ctx, gr.RunID, resumed.Token, nil); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(staging); len(ents) != 0 {
		t.Fatalf("the staging folder holds %v after the release", ents)
	}
}
