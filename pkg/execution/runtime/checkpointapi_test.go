package runtime_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
)

// Checkpoint, suspend, resume and question 6 through the API and its
// client, with the error codes a client branches on.
func TestCheckpointAPI(t *testing.T) {
	w := newWarmWorld(t)
	g := w.generation(t, nil)
	f := newCkptRig(t, w.desired(t, "rev-1", 0, g))
	srv, err := runtime.NewServer(f.rt, nil, f.be, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c, err := runtimeapi.NewClient(hs.URL, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	gr, err := c.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, gr.RunID, runtimeapi.ExecBody{Token: gr.Token, Argv: []string{"sh", "-c", "echo kept > kept.txt"}}); err != nil {
		t.Fatal(err)
	}
	d, err := c.Durable(ctx, gr.RunID)
	if err != nil || d.Head != "" || d.LastRestore != nil || d.Durable[0] != "workspace" {
		t.Fatalf("durable before any checkpoint: %+v %v", d, err)
	}
	if _, err := c.Checkpoint(ctx, gr.RunID, runtimeapi.CheckpointBody{Token: "wrong"}); apiCode(err) != runtimeapi.CodeFenced {
		t.Fatalf("checkpoint with a wrong token: %v", err)
	}
	cp, err := c.Checkpoint(ctx, gr.RunID, runtimeapi.CheckpointBody{Token: gr.Token, EventSeq: 5})
	if err != nil || cp.EventSeq != 5 || cp.Layers != 1 || cp.SandboxID != gr.SandboxID || cp.Generation != g.ID {
		t.Fatalf("checkpoint %+v %v", cp, err)
	}
	sp, err := c.Suspend(ctx, gr.RunID, runtimeapi.CheckpointBody{Token: gr.Token, EventSeq: 6})
	if err != nil || !sp.Suspended || sp.Parent != cp.Checkpoint {
		t.Fatalf("suspend %+v %v", sp, err)
	}
	if _, err := c.Exec(ctx, gr.RunID, runtimeapi.ExecBody{Token: gr.Token, Argv: []string{"true"}}); apiCode(err) != runtimeapi.CodeSuspended {
		t.Fatalf("exec on a suspended run: %v", err)
	}
	m, err := c.Run(ctx, gr.RunID)
	if err != nil || m.WorkspaceCheckpointID != sp.Checkpoint {
		t.Fatalf("manifest workspace_checkpoint_id %q %v, want %s", m.WorkspaceCheckpointID, err, sp.Checkpoint)
	}
	ng, err := c.Resume(ctx, gr.RunID, runtimeapi.ResumeBody{Token: gr.Token})
	if err != nil || ng.AllocationAttempt != 2 {
		t.Fatalf("resume %+v %v", ng, err)
	}
	res, err := c.Exec(ctx, ng.RunID, runtimeapi.ExecBody{Token: ng.Token, Argv: []string{"cat", "kept.txt"}})
	if err != nil || res.Stdout != "kept\n" {
		t.Fatalf("after resume: %+v %v", res, err)
	}
	d, err = c.Durable(ctx, gr.RunID)
	if err != nil || d.Head != sp.Checkpoint || d.HeadEventSeq != 6 || d.LastRestore == nil || d.LastRestore.By != "resume" ||
		time.Since(d.LastRestore.At) > time.Minute || strings.Contains(d.LastRestore.Into, "/") {
		t.Fatalf("durable after resume: %+v %v", d, err)
	}
	if _, err := c.Resume(ctx, gr.RunID, runtimeapi.ResumeBody{Token: ng.Token}); err == nil {
		t.Fatal("a running run resumed")
	}
	if err := c.Release(ctx, ng.RunID, runtimeapi.ReleaseBody{Token: ng.Token}); err != nil {
		t.Fatal(err)
	}

	// A runtime without a checkpoint store says so.
	bare := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return f.d.Load(), time.Now() },
		runtime.NewWarm(f.be, runtime.NewRegistryArtifacts(t.TempDir())), f.store, time.Minute)
	t.Cleanup(func() { bare.Close() })
	srv2, err := runtime.NewServer(bare, nil, f.be, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	hs2 := httptest.NewServer(srv2)
	t.Cleanup(hs2.Close)
	c2, _ := runtimeapi.NewClient(hs2.URL, apiToken)
	if _, err := c2.Checkpoint(ctx, "r-none", runtimeapi.CheckpointBody{Token: "x"}); apiCode(err) != runtimeapi.CodeNoCheckpoints {
		t.Fatalf("checkpoint on a runtime without checkpoints: %v", err)
	}
}

func apiCode(err error) string {
	var ae *runtimeapi.APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}
