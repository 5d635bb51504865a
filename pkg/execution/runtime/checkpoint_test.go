package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/release/scan"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

type ckptRig struct {
	be    *local.Backend
	store runs.Store
	rt    *runtime.Runtime
	d     atomic.Pointer[runtime.Desired]
	cps   runtime.Checkpoints
	log   *syncBuffer
}

func newCkptRig(t testing.TB, d *runtime.Desired, mods ...func(*runtime.Checkpoints)) *ckptRig {
	t.Helper()
	ctx := context.Background()
	f := &ckptRig{log: &syncBuffer{}}
	f.d.Store(d)
	var err error
	if f.be, err = local.New(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if f.store, err = runs.OpenSQLite(ctx, filepath.Join(t.TempDir(), runs.StateFile)); err != nil {
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
	f.cps = runtime.Checkpoints{Store: st, Signer: sv, Verifier: v}
	for _, m := range mods {
		m(&f.cps)
	}
	warm := runtime.NewWarm(f.be, runtime.NewRegistryArtifacts(t.TempDir()))
	f.rt = runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return f.d.Load(), time.Now() }, warm, f.store, time.Minute,
		runtime.WithLog(f.log), runtime.WithCheckpoints(f.cps))
	t.Cleanup(func() {
		f.rt.Close()
		all, _ := f.be.List(ctx, sandbox.Filter{})
		for _, s := range all {
			_ = f.be.Delete(ctx, s.ID)
		}
		f.be.Close()
		f.store.Close()
	})
	return f
}

// The script that fills a workspace with mixed files and the one that
// hashes it, run inside the sandbox.
const (
	fillWorkspace = `set -e; mkdir -p src/pkg data; echo 'package main' > src/pkg/main.go; ` +
		`head -c 300000 /dev/urandom > data/blob.bin; chmod 600 data/blob.bin; ln -s src/pkg/main.go link; ` +
		`echo temp > delete-me.txt`
	hashWorkspace = `find . -type f | sort | xargs sha256sum; find . -type l | sort; ls -ln data | sed 1d | cut -c1-10`
)

// An old checkpoint restored on a new generation, on one host: a run on
// generation A is checkpointed (its sandbox frozen and thawed), suspended
// (sandbox gone, run open), the pool moves to generation B, and the run
// resumes on B with every file as it was, a fresh machine-id, a new
// attempt and token; the manifest names the checkpoint; the sandbox's
// credential is not in the checkpoint (checked by the template scanner
// and byte for byte).
func TestCheckpointSuspendResumeOnNewGeneration(t *testing.T) {
	w := newWarmWorld(t)
	gA := secretGeneration(t, w)
	gB := w.generation(t, gA)
	f := newCkptRig(t, w.desired(t, "rev-1", 0, gA))
	ctx := context.Background()

	gr, err := f.rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	token := execOut(t, f.rt, gr, "cat "+sandbox.CredentialDir+"/"+runtime.CredentialFile)
	if strings.TrimSpace(token) == "" {
		t.Fatal("no credential in the sandbox")
	}
	execOut(t, f.rt, gr, fillWorkspace)
	machineA := execOut(t, f.rt, gr, "cat /etc/machine-id")

	cp, err := f.rt.Checkpoint(ctx, gr.RunID, runtime.CheckpointRequest{Token: gr.Token, EventSeq: 42})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := f.be.FreezerState(gr.SandboxID); err != nil || st != "THAWED" {
		t.Fatalf("freezer state after the checkpoint %q %v, want THAWED (it was frozen for the copy)", st, err)
	}
	if cp.Predicate.EventSeq != 42 || cp.Predicate.Generation != gA.ID || cp.Predicate.SandboxID != gr.SandboxID || cp.Predicate.Tenant != "acme" {
		t.Fatalf("predicate %+v", cp.Predicate)
	}
	m, err := f.store.Get(ctx, gr.RunID)
	if err != nil || m.WorkspaceCheckpointID != cp.Digest {
		t.Fatalf("manifest workspace_checkpoint_id %q %v, want %s", m.WorkspaceCheckpointID, err, cp.Digest)
	}
	// The sandbox still runs after the checkpoint.
	execOut(t, f.rt, gr, "rm delete-me.txt; echo more >> src/pkg/main.go")
	want := execOut(t, f.rt, gr, hashWorkspace)
	if !strings.Contains(want, "./data/blob.bin") || !strings.Contains(want, "./link") || strings.Contains(want, "delete-me") {
		t.Fatalf("the workspace is not what the test wrote:\n%s", want)
	}

	// No credential in any checkpoint: the scanner of templates and a byte search.
	dir := filepath.Join(t.TempDir(), "look")
	if _, _, _, err := checkpoint.Restore(ctx, f.cps.Store, cp.Digest, f.cps.Verifier, checkpoint.Expect{Tenant: "acme", Generations: []string{gA.ID}}, dir); err != nil {
		t.Fatal(err)
	}
	rep, err := scan.Scan(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatalf("the scanner finds secrets in the checkpoint: %v", err)
	}
	if hit := grepTree(t, dir, []byte(strings.TrimSpace(token))); hit != "" {
		t.Fatalf("the sandbox's credential is in the checkpoint, in %s", hit)
	}

	susp, err := f.rt.Suspend(ctx, gr.RunID, runtime.CheckpointRequest{Token: gr.Token, EventSeq: 43})
	if err != nil {
		t.Fatal(err)
	}
	if susp.Predicate.Parent != cp.Digest || susp.Predicate.Reused != cp.Predicate.Layers {
		t.Fatalf("the suspend's checkpoint is not incremental on the first: %+v", susp.Predicate)
	}
	if all, _ := f.be.List(ctx, sandbox.Filter{}); len(all) != 0 {
		t.Fatalf("a suspended run keeps %d sandboxes", len(all))
	}
	if _, err := f.rt.Exec(ctx, gr.RunID, gr.Token, execReq("true"), &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, runtime.ErrSuspended) {
		t.Fatalf("exec on a suspended run: %v", err)
	}
	if _, err := f.rt.Move(ctx, gr.RunID); !errors.Is(err, runtime.ErrSuspended) {
		t.Fatalf("move of a suspended run: %v", err)
	}

	// The pool moves to generation B; the run resumes there.
	f.d.Store(w.desired(t, "rev-2", 0, gB, gA))
	resumed, err := f.rt.Resume(ctx, gr.RunID, gr.Token)
	if err != nil {
		t.Fatalf("resume: %v; log %s", err, f.log.String())
	}
	if resumed.AllocationAttempt != gr.AllocationAttempt+1 || resumed.Token == gr.Token || resumed.SandboxID == gr.SandboxID {
		t.Fatalf("resumed grant %+v (was %+v)", resumed, gr)
	}
	if got := execOut(t, f.rt, resumed, hashWorkspace); got != want {
		t.Fatalf("workspace after resume:\n%s\nwant:\n%s", got, want)
	}
	if machineB := execOut(t, f.rt, resumed, "cat /etc/machine-id"); machineB == machineA {
		t.Fatalf("the resumed sandbox kept machine-id %q: no refresh phase", machineB)
	}
	all, _ := f.be.List(ctx, sandbox.Filter{})
	if len(all) != 1 || all[0].Generation != gB.ID {
		t.Fatalf("sandboxes after resume: %+v", all)
	}
	if m, err := f.store.Get(ctx, gr.RunID); err != nil || m.Generation != gB.ID || m.SandboxID != resumed.SandboxID || m.WorkspaceCheckpointID != susp.Digest {
		t.Fatalf("manifest after resume: generation %s sandbox %s checkpoint %s (%v)", m.Generation, m.SandboxID, m.WorkspaceCheckpointID, err)
	}
	if _, err := f.rt.Exec(ctx, gr.RunID, gr.Token, execReq("true"), &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, runtime.ErrFenced) {
		t.Fatalf("the suspended attempt's token after resume: %v, want ErrFenced", err)
	}
	dur, err := f.rt.Durable(ctx, gr.RunID)
	if err != nil || dur.Head != susp.Digest || dur.HeadEventSeq != 43 || dur.Checkpoints != 2 || dur.LastRestore == nil ||
		dur.LastRestore.Checkpoint != susp.Digest || dur.LastRestore.By != "resume" || dur.LastRestore.Into != resumed.SandboxID || dur.Suspended {
		t.Fatalf("durable %+v %v", dur, err)
	}
	// The next checkpoint continues the chain from the restored workspace.
	again, err := f.rt.Checkpoint(ctx, gr.RunID, runtime.CheckpointRequest{Token: resumed.Token})
	if err != nil {
		t.Fatal(err)
	}
	if again.Predicate.Parent != susp.Digest || again.Predicate.Generation != gB.ID {
		t.Fatalf("checkpoint after resume: %+v", again.Predicate)
	}
	if err := f.rt.Release(ctx, gr.RunID, resumed.Token, nil); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint whose signed attestation was changed in the store is
// refused at resume, with the reason; no sandbox is made and the run stays
// suspended.
func TestResumeRefusesATamperedCheckpoint(t *testing.T) {
	w := newWarmWorld(t)
	g := w.generation(t, nil)
	f := newCkptRig(t, w.desired(t, "rev-1", 0, g))
	ctx := context.Background()
	gr, err := f.rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	execOut(t, f.rt, gr, "echo hi > f")
	cp, err := f.rt.Suspend(ctx, gr.RunID, runtime.CheckpointRequest{Token: gr.Token})
	if err != nil {
		t.Fatal(err)
	}
	// Change the attestation's signature in the store: a well-formed
	// envelope that no longer verifies with the runtime's key.
	envs, _ := filepath.Glob(filepath.Join(f.cps.Store.Dir(), "blobs", "sha256", "*"))
	replaced := 0
	for _, p := range envs {
		b, _ := os.ReadFile(p)
		if !bytes.Contains(b, []byte(`"payloadType"`)) {
			continue
		}
		// Flip one byte of the signature: the envelope stays JSON.
		i := bytes.Index(b, []byte(`"sig":"`)) + len(`"sig":"`) + 2
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		_ = os.Chmod(p, 0o644)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		replaced++
	}
	if replaced != 1 {
		t.Fatalf("found %d envelopes", replaced)
	}
	_, err = f.rt.Resume(ctx, gr.RunID, gr.Token)
	if !errors.Is(err, checkpoint.ErrRefused) || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("resume of a tampered checkpoint %s: %v", cp.Digest, err)
	}
	if all, _ := f.be.List(ctx, sandbox.Filter{}); len(all) != 0 {
		t.Fatalf("a refused resume left %d sandboxes", len(all))
	}
	if _, err := f.rt.Exec(ctx, gr.RunID, gr.Token, execReq("true"), &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, runtime.ErrSuspended) {
		t.Fatalf("after a refused resume the run is not suspended: %v", err)
	}
	if err := f.rt.Release(ctx, gr.RunID, gr.Token, nil); err != nil {
		t.Fatalf("release of a suspended run: %v", err)
	}
}

// grepTree returns the first file under dir that contains needle.
func grepTree(t *testing.T, dir string, needle []byte) string {
	t.Helper()
	hit := ""
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || hit != "" {
			return err
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, needle) {
			hit = p
		}
		return nil
	})
	return hit
}

func execReq(script string) runner.ExecRequest {
	return runner.ExecRequest{Argv: []string{"sh", "-c", script}}
}
