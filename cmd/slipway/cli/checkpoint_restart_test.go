package cli

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// TestSuspendedRunSurvivesRestart: a suspended run is durable. It is
// suspended on `runtime serve`, the runtime is killed (SIGKILL) and started
// again on the same state: the run is still open and suspended, with its
// owner (its token resumes it, another is fenced), its attempt and its
// checkpoint head; it resumes with every file as it was (hashes). It is
// suspended again and the runtime stopped cleanly (SIGTERM, which finalises
// open runs without sandboxes): the third runtime resumes it too, and its
// release leaves no suspension record. checkpoint durable counts the run's
// checkpoints in words ("1 checkpoint", "2 checkpoints").
func TestSuspendedRunSurvivesRestart(t *testing.T) {
	start := time.Now()
	repo, _ := runtimeConfigRepo(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(restartToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	priv, _, err := sign.GenerateKeys([]byte("ckpt-pw"))
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "checkpoint.key")
	if err := os.WriteFile(keyFile, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COSIGN_PASSWORD", "ckpt-pw")
	state := filepath.Join(dir, "state")
	ctx := context.Background()
	t.Logf("fixtures ready after %v", time.Since(start).Round(time.Millisecond))

	exec := func(rt *runtimeProc, g *runtimeapi.Grant, script string) string {
		t.Helper()
		res, err := rt.client.Exec(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, Argv: []string{"sh", "-c", "cd /workspace && " + script}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec %q: %+v, %v", script, res, err)
		}
		return res.Stdout
	}
	const hashes = `find . -type f | sort | xargs sha256sum; find . -type l | sort`

	rt1 := startRuntime(t, repo, state, tokenFile, "--checkpoint-key", keyFile)
	g, err := rt1.client.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	exec(rt1, g, `mkdir -p src/pkg data && echo 'package main' > src/pkg/main.go && head -c 200000 /dev/urandom > data/blob.bin && ln -s src/pkg/main.go link`)
	want := exec(rt1, g, hashes)
	if !strings.Contains(want, "./data/blob.bin") || !strings.Contains(want, "./link") {
		t.Fatalf("the workspace is not what the test wrote:\n%s", want)
	}
	cp, err := rt1.client.Suspend(ctx, g.RunID, runtimeapi.CheckpointBody{Token: g.Token, EventSeq: 7})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(state, serve.CheckpointDir, runtime.SuspendedDir, g.RunID+".json")); err != nil {
		t.Fatalf("no suspension record of the suspended run: %v", err)
	}

	// SIGKILL, and a second life on the same state.
	if err := rt1.stop(t, syscall.SIGKILL, 10*time.Second); err == nil {
		t.Fatal("the killed runtime exited 0")
	}
	rt2 := startRuntime(t, repo, state, tokenFile, "--checkpoint-key", keyFile)
	if !rt2.logged("holding 1 suspended runs of an earlier run: " + g.RunID) {
		t.Errorf("the restarted runtime does not say it holds the suspended run:\n%s", rt2.text())
	}
	m, err := rt2.client.Run(ctx, g.RunID)
	if err != nil || m.Status.Final() || m.WorkspaceCheckpointID != cp.Checkpoint || m.AllocationAttempt != 1 || !m.Lifecycle.ResourcesReleased.IsZero() {
		t.Fatalf("the suspended run after the kill: %+v, %v; want it open at checkpoint %s", m, err, cp.Checkpoint)
	}
	d, err := rt2.client.Durable(ctx, g.RunID)
	if err != nil || !d.Suspended || d.Head != cp.Checkpoint || d.HeadEventSeq != 7 {
		t.Fatalf("durable after the kill: %+v, %v", d, err)
	}
	durable := func(rt *runtimeProc, count string) {
		t.Helper()
		r := run(t, "", "checkpoint", "durable", g.RunID, "--runtime", rt.base, "--token-file", tokenFile)
		if r.code != 0 || !strings.Contains(r.stdout, "head: sha256:") || !strings.Contains(r.stdout, "; "+count+")\n") || !strings.Contains(r.stdout, "suspended: yes") {
			t.Errorf("checkpoint durable (exit %d), want %q:\n%s%s", r.code, count, r.stdout, r.stderr)
		}
	}
	durable(rt2, "1 checkpoint")
	var ae *runtimeapi.APIError
	if _, err := rt2.client.Exec(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, Argv: []string{"true"}}); !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != runtimeapi.CodeSuspended {
		t.Errorf("exec in the suspended run: %v, want 409 %s", err, runtimeapi.CodeSuspended)
	}
	if _, err := rt2.client.Resume(ctx, g.RunID, runtimeapi.ResumeBody{Token: "not-the-owners-token"}); !errors.As(err, &ae) || ae.Status != http.StatusConflict {
		t.Errorf("resume with another token: %v, want 409 fenced", err)
	}
	g2, err := rt2.client.Resume(ctx, g.RunID, runtimeapi.ResumeBody{Token: g.Token})
	if err != nil {
		t.Fatalf("resume after the kill: %v\n%s", err, rt2.text())
	}
	if g2.AllocationAttempt != 2 || g2.Token == g.Token || g2.SandboxID == "" || g2.SandboxID == g.SandboxID {
		t.Errorf("grant of the resume: %+v (suspended from %+v)", g2, g)
	}
	if got := exec(rt2, g2, hashes); got != want {
		t.Fatalf("files after suspend, kill and resume:\n%s\nwant:\n%s", got, want)
	}

	// Suspended again, then a clean stop: the stop spares it too.
	exec(rt2, g2, `echo second >> src/pkg/main.go && rm link`)
	want = exec(rt2, g2, hashes)
	if _, err := rt2.client.Suspend(ctx, g.RunID, runtimeapi.CheckpointBody{Token: g2.Token}); err != nil {
		t.Fatal(err)
	}
	durable(rt2, "2 checkpoints")
	if err := rt2.stop(t, syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("the runtime did not stop cleanly: %v\n%s", err, rt2.text())
	}
	if strings.Contains(rt2.text(), "finalised 1 open runs as failed: the runtime stopped") {
		t.Errorf("the clean stop finalised the suspended run:\n%s", rt2.text())
	}
	rt3 := startRuntime(t, repo, state, tokenFile, "--checkpoint-key", keyFile)
	g3, err := rt3.client.Resume(ctx, g.RunID, runtimeapi.ResumeBody{Token: g2.Token})
	if err != nil {
		t.Fatalf("resume after the clean stop: %v\n%s", err, rt3.text())
	}
	if got := exec(rt3, g3, hashes); got != want || g3.AllocationAttempt != 3 {
		t.Fatalf("attempt %d, files after suspend, stop and resume:\n%s\nwant:\n%s", g3.AllocationAttempt, got, want)
	}
	zero := 0
	if err := rt3.client.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g3.Token, ExitCode: &zero}); err != nil {
		t.Fatal(err)
	}
	if m, err := rt3.client.Run(ctx, g.RunID); err != nil || m.Status != runmanifest.StatusCompleted {
		t.Errorf("the released run: %+v, %v", m, err)
	}
	if ents, err := os.ReadDir(filepath.Join(state, serve.CheckpointDir, runtime.SuspendedDir)); err != nil || len(ents) != 0 {
		t.Errorf("suspension records after the release: %v, %v", ents, err)
	}
	if err := rt3.stop(t, syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("the runtime did not stop cleanly: %v\n%s", err, rt3.text())
	}
	t.Logf("three lives took %v", time.Since(start).Round(time.Millisecond))
}
