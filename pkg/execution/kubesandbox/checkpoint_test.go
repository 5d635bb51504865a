//go:build linux

package kubesandbox_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/release/scan"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

// kubeCkpt is a runtime on the Kubernetes backend that keeps checkpoints.
type kubeCkpt struct {
	be    *kubesandbox.Backend
	store runs.Store
	rt    *runtime.Runtime
	cps   runtime.Checkpoints
	d     atomic.Pointer[runtime.Desired]
	log   *lockedBuffer
}

func newKubeCkpt(t *testing.T, n *node, d *runtime.Desired, broker bool) *kubeCkpt {
	t.Helper()
	ctx := context.Background()
	k := &kubeCkpt{log: &lockedBuffer{}}
	k.d.Store(d)
	var err error
	if k.be, err = kubesandbox.New(n.c.Config(), n.ns, kubesandbox.WithClusterName("node-test")); err != nil {
		t.Fatal(err)
	}
	if k.store, err = runs.OpenSQLite(ctx, filepath.Join(t.TempDir(), runs.StateFile)); err != nil {
		t.Fatal(err)
	}
	priv, pub, err := sign.GenerateKeys([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := sign.LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := sign.LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	st, err := checkpoint.OpenStore(filepath.Join(t.TempDir(), "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	k.cps = runtime.Checkpoints{Store: st, Signer: sv, Verifier: v}
	opts := []runtime.RuntimeOption{runtime.WithLog(k.log), runtime.WithCheckpoints(k.cps)}
	if broker {
		b, err := runtime.NewBroker(runtime.LocalIssuer, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, runtime.WithBroker(b))
	}
	warm := runtime.NewWarm(k.be, runtime.NewRegistryArtifacts(t.TempDir()), runtime.WithWarmLog(k.log))
	k.rt = runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return k.d.Load(), time.Now() }, warm, k.store, time.Minute, opts...)
	t.Cleanup(func() {
		k.rt.Close()
		k.store.Close()
	})
	return k
}

// sh runs script in the run's sandbox and returns its stdout; it must exit 0.
func (k *kubeCkpt) sh(t *testing.T, gr *runtimeapi.Grant, script string) string {
	t.Helper()
	var out, errb bytes.Buffer
	st, err := k.rt.Exec(context.Background(), gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"sh", "-c", script}}, &out, &errb)
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("exec %q: %+v %v; stderr %q", script, st, err, errb.String())
	}
	return out.String()
}

// The workspace a test writes in a pod, and how it is listed: each
// regular file's sha256 (as sha256sum prints it), then each symbolic link
// with its target, sorted. hostListing lists a directory on the host the
// same way.
const (
	fillPodWorkspace = `set -e; cd ` + kubeobjects.WorkspaceVolumeDir + `; mkdir -p src/pkg data empty; ` +
		`echo 'package main' > src/pkg/main.go; head -c 300000 /dev/urandom > data/blob.bin; chmod 600 data/blob.bin; ` +
		`ln -s src/pkg/main.go link; echo temp > delete-me.txt`
	listPodWorkspace = `set -e; cd ` + kubeobjects.WorkspaceVolumeDir + `; find . -type f | sort | xargs sha256sum; ` +
		`for l in $(find . -type l | sort); do echo "$l -> $(readlink $l)"; done; ls -ln data | sed 1d | cut -c1-10`
)

func hostListing(t *testing.T, dir string) string {
	t.Helper()
	var files, links []string
	perms := ""
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		name := "./" + filepath.ToSlash(rel)
		switch {
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			files = append(files, name+"\x00"+hex.EncodeToString(sum[:])+"  "+name)
			if filepath.Dir(rel) == "data" {
				fi, _ := d.Info()
				perms += "-" + fi.Mode().Perm().String()[1:] + "\n"
			}
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			links = append(links, name+" -> "+l)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files) // by name, as find | sort lists them
	for i, f := range files {
		files[i] = f[strings.IndexByte(f, 0)+1:]
	}
	sort.Strings(links)
	return strings.Join(files, "\n") + "\n" + strings.Join(links, "\n") + "\n" + perms
}

// secretNode is a node whose first generation pins a secretVersion, with
// the Secret of that version in the namespace.
func secretNode(t *testing.T, name string) (*node, *generation.Generation) {
	t.Helper()
	n := startNode(t, name)
	const version = "vault://kv/agents/token#7"
	g := n.generationPinning(t, nil, "", generation.Pins{generation.SecretVersion: {ID: version}})
	dyn, err := n.c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": kubeobjects.SecretName(version), "namespace": n.ns},
		"data":     map[string]any{"value": base64.StdEncoding.EncodeToString([]byte(mountedSecret))},
	}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace(n.ns).
		Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return n, g
}

const counterFile = kubeobjects.WorkspaceVolumeDir + "/.counter"

const mountedSecret = "from-the-secret-store-3f9a7c"

// A checkpoint of a run on Kubernetes: Freeze holds the workload still
// (a loop writing a counter stops, and goes on after the thaw); the
// checkpoint of the pod's workspace, copied out through pod exec, holds
// every file with the content the pod hashes, its modes and symbolic
// links; it names the run, sandbox, generation and event sequence, and
// the run manifest its id; the credential the broker put in the pod and
// the Secret mounted there are in no file of it (the template scanner and
// a byte search), even with a symbolic link to the credential in the
// workspace (copied as a link). A second checkpoint is incremental: one
// new layer with what changed, found by its bytes.
func TestCheckpointOnKube(t *testing.T) {
	n, g := secretNode(t, "ckpt")
	k := newKubeCkpt(t, n, n.desire(t, 1), true)
	ctx := context.Background()
	gr, err := k.rt.Claim(ctx, runtime.ClaimRequest{Pool: n.pool, Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(k.sh(t, gr, "cat "+sandbox.CredentialDir+"/"+runtime.CredentialFile))
	if token == "" {
		t.Fatal("no credential in the pod")
	}

	// The freeze, seen from the workload.
	loop, stopLoop := context.WithCancel(ctx)
	looped := make(chan error, 1)
	go func() {
		_, err := k.rt.Exec(loop, gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"sh", "-c",
			"i=0; while :; do i=$((i+1)); echo $i > " + counterFile + "; sleep 0.05; done"}}, io.Discard, io.Discard)
		looped <- err
	}()
	counter := func() string { return strings.TrimSpace(k.sh(t, gr, "cat "+counterFile+" 2>/dev/null || echo none")) }
	for deadline := time.Now().Add(3 * time.Minute); counter() == "none"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the loop never wrote its counter")
		}
	}
	thaw, err := k.be.Freeze(ctx, gr.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	held := counter()
	time.Sleep(time.Second)
	if again := counter(); again != held {
		t.Errorf("the counter went from %s to %s while the workload was stopped", held, again)
	}
	if err := thaw(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Minute); counter() == held; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the counter stayed at %s after the thaw", held)
		}
	}
	stopLoop()
	<-looped
	k.sh(t, gr, "rm "+counterFile)

	k.sh(t, gr, fillPodWorkspace+"; ln -s "+sandbox.CredentialDir+"/"+runtime.CredentialFile+" token-link")
	want := k.sh(t, gr, listPodWorkspace)
	if !strings.Contains(want, "./data/blob.bin") || !strings.Contains(want, "./token-link -> ") {
		t.Fatalf("the pod's workspace is not what the test wrote:\n%s", want)
	}
	cp, err := k.rt.Checkpoint(ctx, gr.RunID, runtime.CheckpointRequest{Token: gr.Token, EventSeq: 42})
	if err != nil {
		t.Fatalf("checkpoint: %v; log:\n%s", err, k.log.String())
	}
	p := cp.Predicate
	if p.RunID != gr.RunID || p.SandboxID != gr.SandboxID || p.Generation != g.ID || p.Tenant != "acme" || p.EventSeq != 42 ||
		p.Layers != 1 || p.Entries == 0 || cp.Frozen <= 0 {
		t.Fatalf("checkpoint %+v", cp)
	}
	if m, err := k.store.Get(ctx, gr.RunID); err != nil || m.WorkspaceCheckpointID != cp.Digest {
		t.Fatalf("manifest workspace_checkpoint_id %q %v, want %s", m.WorkspaceCheckpointID, err, cp.Digest)
	}
	staging := filepath.Join(k.cps.Store.Dir(), runtime.StagingDir)
	if left, _ := os.ReadDir(staging); len(left) != 1 || left[0].Name() != gr.RunID {
		t.Errorf("the staging folder holds %v, want only the run's kept copy", left)
	}
	if fi, err := os.Stat(filepath.Join(staging, gr.RunID)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the run's kept copy: %v %v, want mode 0700", fi, err)
	}
	// The pod goes on after it.
	k.sh(t, gr, "echo after > "+kubeobjects.WorkspaceVolumeDir+"/after.txt")

	dir := filepath.Join(t.TempDir(), "look")
	if _, _, _, err := checkpoint.Restore(ctx, k.cps.Store, cp.Digest, k.cps.Verifier, checkpoint.Expect{Tenant: "acme", Generations: []string{g.ID}}, dir); err != nil {
		t.Fatal(err)
	}
	if got := hostListing(t, dir); got != want {
		t.Fatalf("the checkpoint holds:\n%s\nthe pod held:\n%s", got, want)
	}
	rep, err := scan.Scan(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatalf("the scanner finds secrets in the checkpoint: %v", err)
	}
	for _, secret := range []string{token, mountedSecret} {
		if hit := grepTree(t, dir, []byte(secret)); hit != "" {
			t.Fatalf("a secret of the pod is in the checkpoint, in %s", hit)
		}
	}

	// A second checkpoint is incremental on the runtime's kept copy of
	// the workspace: a file rewritten with the same size and its mtime
	// set back (found by its bytes) and the file added since make the one
	// new layer; the checkpoint holds every file as the pod does.
	k.sh(t, gr, `set -e; cd `+kubeobjects.WorkspaceVolumeDir+`; touch -r data/blob.bin ref; `+
		`head -c 300000 /dev/urandom > data/blob.bin; touch -r ref data/blob.bin; rm ref`)
	want = k.sh(t, gr, listPodWorkspace)
	cp2, err := k.rt.Checkpoint(ctx, gr.RunID, runtime.CheckpointRequest{Token: gr.Token, EventSeq: 43})
	if err != nil {
		t.Fatalf("second checkpoint: %v; log:\n%s", err, k.log.String())
	}
	p = cp2.Predicate
	t.Logf("second checkpoint: %d of %d layers new, %d tar entries, %d bytes, workload stopped %s", p.Layers-p.Reused, p.Layers,
		p.Entries, p.Bytes, cp2.Frozen.Round(time.Millisecond))
	if p.Parent != cp.Digest || p.Layers != 2 || p.Reused != 1 || p.Entries > 4 || p.Bytes >= cp.Predicate.Bytes {
		t.Fatalf("second checkpoint %+v: want one new layer on %s with data/blob.bin and after.txt", p, cp.Digest)
	}
	if !strings.Contains(k.log.String(), "1 of 2 layers new") {
		t.Errorf("the runtime's log does not say the second checkpoint reused a layer:\n%s", k.log.String())
	}
	dir = filepath.Join(t.TempDir(), "look2")
	if _, _, _, err := checkpoint.Restore(ctx, k.cps.Store, cp2.Digest, k.cps.Verifier, checkpoint.Expect{Tenant: "acme", Generations: []string{g.ID}}, dir); err != nil {
		t.Fatal(err)
	}
	if got := hostListing(t, dir); got != want {
		t.Fatalf("the second checkpoint holds:\n%s\nthe pod held:\n%s", got, want)
	}
	if err := k.rt.Release(ctx, gr.RunID, gr.Token, nil); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(staging); len(left) != 0 {
		t.Errorf("the staging folder holds %v after the release", left)
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

// suspendResume fills the run's workspace, suspends it (its claim, Sandbox
// and pod gone; the run open with its owner), lets between change the
// runtime's desired state, resumes it and checks the workspace came back
// file for file; it returns the suspend's checkpoint and the new grant.
func suspendResume(t *testing.T, n *node, k *kubeCkpt, gr *runtimeapi.Grant, between func()) (*checkpoint.Checkpoint, *runtimeapi.Grant) {
	t.Helper()
	ctx := context.Background()
	k.sh(t, gr, fillPodWorkspace+"; rm delete-me.txt; echo more >> src/pkg/main.go")
	want := k.sh(t, gr, listPodWorkspace)
	start := time.Now()
	cp, err := k.rt.Suspend(ctx, gr.RunID, runtime.CheckpointRequest{Token: gr.Token, EventSeq: 7})
	if err != nil {
		t.Fatalf("suspend: %v; log:\n%s", err, k.log.String())
	}
	t.Logf("suspend took %s (workload stopped %s for the copy, %d tar entries, %d bytes)", time.Since(start).Round(time.Millisecond),
		cp.Frozen.Round(time.Millisecond), cp.Predicate.Entries, cp.Predicate.Bytes)
	gone(t, n, claimsGVR, kubesandbox.ClaimName(gr.RunID))
	gone(t, n, sandboxesGVR, gr.SandboxID)
	gone(t, n, podsGVR, gr.SandboxID)
	if all, err := k.be.List(ctx, sandbox.Filter{}); err != nil || len(all) != 0 {
		t.Fatalf("a suspended run keeps claims: %+v %v", all, err)
	}
	if m, err := k.store.Get(ctx, gr.RunID); err != nil || m.Status.Final() || m.WorkspaceCheckpointID != cp.Digest {
		t.Fatalf("the suspended run's manifest: %+v %v", m, err)
	}
	if _, err := k.rt.Exec(ctx, gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"true"}}, io.Discard, io.Discard); !errors.Is(err, runtime.ErrSuspended) {
		t.Fatalf("exec on a suspended run: %v, want ErrSuspended", err)
	}
	if between != nil {
		between()
	}
	start = time.Now()
	resumed, err := k.rt.Resume(ctx, gr.RunID, gr.Token)
	if err != nil {
		t.Fatalf("resume: %v; log:\n%s", err, k.log.String())
	}
	t.Logf("resume took %s (a warm claim, verify, restore through pod exec)", time.Since(start).Round(time.Millisecond))
	if resumed.SandboxID == gr.SandboxID || resumed.AllocationAttempt != gr.AllocationAttempt+1 || resumed.Token == gr.Token {
		t.Fatalf("resumed grant %+v (was %+v)", resumed, gr)
	}
	if got := k.sh(t, resumed, listPodWorkspace); got != want {
		t.Fatalf("the workspace after resume:\n%s\nwant:\n%s", got, want)
	}
	if _, err := k.rt.Exec(ctx, gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"true"}}, io.Discard, io.Discard); !errors.Is(err, runtime.ErrFenced) {
		t.Fatalf("the suspended attempt's token after resume: %v, want ErrFenced", err)
	}
	dur, err := k.rt.Durable(ctx, gr.RunID)
	if err != nil || dur.Head != cp.Digest || dur.LastRestore == nil || dur.LastRestore.Into != resumed.SandboxID || dur.Suspended {
		t.Fatalf("durable %+v %v", dur, err)
	}
	return cp, resumed
}

// Suspend and resume on Kubernetes (delete and restore): the suspend
// checkpoints the workspace and deletes the claim, its Sandbox and its pod
// (the warm pool's capacity is free), the run stays open with its owner;
// the resume claims a new sandbox of the same generation and writes the
// workspace back, every file's hash, mode and link as before. A second
// suspend after one file changed is incremental (one new layer) and
// resumes as the pod held it.
func TestSuspendResumeOnKube(t *testing.T) {
	n := startNode(t, "susp")
	g := n.generation(t, nil)
	k := newKubeCkpt(t, n, n.desire(t, 1), false)
	ctx := context.Background()
	gr, err := k.rt.Claim(ctx, runtime.ClaimRequest{Pool: n.pool, Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	cp, resumed := suspendResume(t, n, k, gr, nil)
	if cp.Predicate.Generation != g.ID || resumed.Generation != g.ID {
		t.Fatalf("checkpoint of %s resumed on %s, want %s", cp.Predicate.Generation, resumed.Generation, g.ID)
	}
	// The resume's restored copy is the runtime's kept one: the next
	// suspend, after one file changed, writes one new layer, and the next
	// resume brings every file back.
	k.sh(t, resumed, `set -e; cd `+kubeobjects.WorkspaceVolumeDir+`; echo changed >> src/pkg/main.go`)
	want := k.sh(t, resumed, listPodWorkspace)
	cp2, err := k.rt.Suspend(ctx, gr.RunID, runtime.CheckpointRequest{Token: resumed.Token, EventSeq: 8})
	if err != nil {
		t.Fatalf("second suspend: %v; log:\n%s", err, k.log.String())
	}
	p := cp2.Predicate
	t.Logf("second suspend: %d of %d layers new, %d tar entries, %d bytes", p.Layers-p.Reused, p.Layers, p.Entries, p.Bytes)
	// The new layer holds src/pkg/main.go and directories only, no
	// 300 kB blob: the pod's restore (runner.RestoreWorkspace keeps
	// permission bits only) left the workspace's four directories without
	// the setgid bit the emptyDir's fsGroup gave them and the checkpoint
	// holds, so they are changed too (headers, no content).
	if p.Parent != cp.Digest || p.Layers != 2 || p.Reused != 1 || p.Entries > 6 || p.Bytes > 8<<10 {
		t.Fatalf("suspend after one file changed %+v: want one new layer on %s of a few kB", p, cp.Digest)
	}
	if resumed, err = k.rt.Resume(ctx, gr.RunID, resumed.Token); err != nil {
		t.Fatalf("second resume: %v; log:\n%s", err, k.log.String())
	}
	if got := k.sh(t, resumed, listPodWorkspace); got != want {
		t.Fatalf("the workspace after the second resume:\n%s\nwant:\n%s", got, want)
	}
	if err := k.rt.Release(ctx, gr.RunID, resumed.Token, nil); err != nil {
		t.Fatal(err)
	}
	gone(t, n, claimsGVR, kubesandbox.ClaimName(gr.RunID))
}

// An old checkpoint restored on a new generation, on the node: a run on
// generation A is suspended, the pool moves to generation B (compatible:
// same pool, overlapping runner protocol), and the run resumes in a pod of
// B's warm pool with its workspace as it was; the manifest names B, the
// checkpoint's attestation A.
func TestOldCheckpointOnNewGenerationOnKube(t *testing.T) {
	n := startNode(t, "newgen")
	gA := n.generation(t, nil)
	gB := n.generation(t, gA)
	d := n.desire(t, 1)
	k := newKubeCkpt(t, n, d, false)
	ctx := context.Background()
	gr, err := k.rt.Claim(ctx, runtime.ClaimRequest{Pool: n.pool, Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if gr.Generation != gA.ID {
		t.Fatalf("claimed on %s, want %s", gr.Generation, gA.ID)
	}
	// The pool moves to B (active, A warming): what the runtime reads
	// from the config repository after a rollout's step 4.
	moved := runtimetest.Desired(d.Revision+"-moved", n.pool, 1, gB, gA)
	cp, resumed := suspendResume(t, n, k, gr, func() { k.d.Store(moved) })
	if cp.Predicate.Generation != gA.ID || resumed.Generation != gB.ID {
		t.Fatalf("checkpoint of %s resumed on %s, want %s on %s", cp.Predicate.Generation, resumed.Generation, gA.ID, gB.ID)
	}
	m, err := k.store.Get(ctx, gr.RunID)
	if err != nil || m.Generation != gB.ID || m.SandboxID != resumed.SandboxID {
		t.Fatalf("manifest after resume: generation %s sandbox %s (%v)", m.Generation, m.SandboxID, err)
	}
	all, err := k.be.List(ctx, sandbox.Filter{})
	if err != nil || len(all) != 1 || all[0].Generation != gB.ID {
		t.Fatalf("claims after resume: %+v %v", all, err)
	}
	if err := k.rt.Release(ctx, gr.RunID, resumed.Token, nil); err != nil {
		t.Fatal(err)
	}
}
