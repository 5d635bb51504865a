package runtime_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
)

// An operator suspends and resumes a run on the runtime's operator path
// (its own token, no claim token), with a reason and an actor that the
// checkpoint store records and question 6 reads back; an action without
// a reason or an actor is refused naming the field, and does nothing; the
// holder's next request is refused as suspended, and after the resume its
// old token is fenced and it adopts the new grant by its request key.
func TestOperatorSuspendResume(t *testing.T) {
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
	claim := runtimeapi.ClaimBody{Tenant: "acme", RequestKey: "job-7.attempt-1"}
	gr, err := c.Claim(ctx, "agents", claim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, gr.RunID, runtimeapi.ExecBody{Token: gr.Token, Argv: []string{"sh", "-c", "echo kept > kept.txt"}}); err != nil {
		t.Fatal(err)
	}

	const actor, reason = "ops/tok-0123abcd", "node drain for a kernel update"
	for _, bad := range []struct {
		a    runtimeapi.OperatorAction
		want string
	}{
		{runtimeapi.OperatorAction{Actor: actor}, "reason: required"},
		{runtimeapi.OperatorAction{Actor: actor, Reason: "   "}, "reason: required"},
		{runtimeapi.OperatorAction{Reason: reason}, "actor: required"},
		{runtimeapi.OperatorAction{Actor: actor, Reason: "two\nlines"}, "reason: control characters"},
		{runtimeapi.OperatorAction{Actor: "ops tok", Reason: reason}, "actor: spaces"},
		{runtimeapi.OperatorAction{Actor: actor, Reason: strings.Repeat("x", runtimeapi.MaxReason+1)}, "reason: 1001 bytes, at most 1000"},
	} {
		_, err := c.SuspendRun(ctx, gr.RunID, bad.a)
		if status(err) != http.StatusBadRequest || apiCode(err) != runtimeapi.CodeInvalid || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("suspend %+v: %v, want 400 saying %q", bad.a, err, bad.want)
		}
	}
	// Refused: nothing was done.
	d, err := c.Durable(ctx, gr.RunID)
	if err != nil || d.Suspended || d.Head != "" || d.LastSuspend != nil {
		t.Fatalf("durable after refused suspends: %+v %v", d, err)
	}
	if _, err := c.Exec(ctx, gr.RunID, runtimeapi.ExecBody{Token: gr.Token, Argv: []string{"true"}}); err != nil {
		t.Fatalf("the holder after refused suspends: %v", err)
	}
	// The runtime's token is the operator's credential.
	other, _ := runtimeapi.NewClient(hs.URL, "not-the-runtime-token")
	if _, err := other.SuspendRun(ctx, gr.RunID, runtimeapi.OperatorAction{Actor: actor, Reason: reason}); status(err) != http.StatusUnauthorized {
		t.Fatalf("suspend with another token: %v", err)
	}

	sp, err := c.SuspendRun(ctx, gr.RunID, runtimeapi.OperatorAction{Actor: actor, Reason: reason})
	if err != nil || !sp.Suspended || sp.Checkpoint == "" || sp.SandboxID != gr.SandboxID {
		t.Fatalf("operator suspend: %+v %v", sp, err)
	}
	if _, err := c.Exec(ctx, gr.RunID, runtimeapi.ExecBody{Token: gr.Token, Argv: []string{"true"}}); apiCode(err) != runtimeapi.CodeSuspended {
		t.Fatalf("the holder's exec on a run an operator suspended: %v", err)
	}
	if _, err := c.SuspendRun(ctx, gr.RunID, runtimeapi.OperatorAction{Actor: actor, Reason: reason}); apiCode(err) != runtimeapi.CodeSuspended {
		t.Fatalf("suspend of a suspended run: %v", err)
	}
	d, err = c.Durable(ctx, gr.RunID)
	if err != nil || !d.Suspended || d.Head != sp.Checkpoint || d.LastSuspend == nil || *d.LastSuspend != (runtimeapi.SuspendRecord{
		Checkpoint: sp.Checkpoint, At: d.LastSuspend.At, By: "operator", Actor: actor, Reason: reason}) || time.Since(d.LastSuspend.At) > time.Minute {
		t.Fatalf("durable after the operator's suspend: %+v %+v %v", d, d.LastSuspend, err)
	}
	// The record is on disk, in the checkpoint store: another Store on
	// the same directory reads it.
	again, err := checkpoint.OpenStore(f.cps.Store.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := again.LastSuspend(gr.RunID); err != nil || rec == nil || rec.Reason != reason || rec.Actor != actor || rec.Checkpoint != sp.Checkpoint {
		t.Fatalf("the store's suspend record: %+v %v", rec, err)
	}

	if _, err := c.ResumeRun(ctx, gr.RunID, runtimeapi.OperatorAction{Actor: actor}); status(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "reason: required") {
		t.Fatalf("resume without a reason: %v", err)
	}
	if d, err := c.Durable(ctx, gr.RunID); err != nil || !d.Suspended || d.LastRestore != nil {
		t.Fatalf("a refused resume did something: %+v %v", d, err)
	}
	const why = "kernel updated, node back"
	res, err := c.ResumeRun(ctx, gr.RunID, runtimeapi.OperatorAction{Actor: actor, Reason: why})
	if err != nil || res.AllocationAttempt != 2 || res.Checkpoint != sp.Checkpoint || res.SandboxID == "" || res.SandboxID == gr.SandboxID || res.Generation != g.ID {
		t.Fatalf("operator resume: %+v %v", res, err)
	}
	if _, err := c.ResumeRun(ctx, gr.RunID, runtimeapi.OperatorAction{Actor: actor, Reason: why}); apiCode(err) != runtimeapi.CodeNotSuspended || status(err) != http.StatusConflict {
		t.Fatalf("resume of a running run: %v", err)
	}
	d, err = c.Durable(ctx, gr.RunID)
	if err != nil || d.Suspended || d.LastRestore == nil || d.LastRestore.By != "resume" || d.LastRestore.Actor != actor ||
		d.LastRestore.Reason != why || d.LastRestore.Into != res.SandboxID || d.LastRestore.Checkpoint != sp.Checkpoint ||
		d.LastSuspend == nil || d.LastSuspend.Reason != reason {
		t.Fatalf("durable after the operator's resume: %+v %+v %v", d, d.LastRestore, err)
	}
	// The holder's token is fenced; it adopts the new grant by its key,
	// and finds its workspace as it left it.
	if _, err := c.Exec(ctx, gr.RunID, runtimeapi.ExecBody{Token: gr.Token, Argv: []string{"true"}}); apiCode(err) != runtimeapi.CodeFenced {
		t.Fatalf("the holder's old token after the resume: %v", err)
	}
	ng, err := c.Claim(ctx, "agents", claim)
	if err != nil || !ng.Adopted || ng.RunID != gr.RunID || ng.AllocationAttempt != 2 || ng.SandboxID != res.SandboxID {
		t.Fatalf("adopt after the resume: %+v %v", ng, err)
	}
	out, err := c.Exec(ctx, ng.RunID, runtimeapi.ExecBody{Token: ng.Token, Argv: []string{"cat", "kept.txt"}})
	if err != nil || out.Stdout != "kept\n" {
		t.Fatalf("after the resume: %+v %v", out, err)
	}
	// The holder's own suspend is recorded as the holder's, with no actor.
	hs2, err := c.Suspend(ctx, ng.RunID, runtimeapi.CheckpointBody{Token: ng.Token})
	if err != nil {
		t.Fatal(err)
	}
	d, err = c.Durable(ctx, gr.RunID)
	if err != nil || d.LastSuspend == nil || d.LastSuspend.By != "holder" || d.LastSuspend.Actor != "" || d.LastSuspend.Reason != "" || d.LastSuspend.Checkpoint != hs2.Checkpoint {
		t.Fatalf("durable after the holder's suspend: %+v %v", d.LastSuspend, err)
	}
	if err := c.Release(ctx, ng.RunID, runtimeapi.ReleaseBody{Token: ng.Token}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SuspendRun(ctx, "r-none", runtimeapi.OperatorAction{Actor: actor, Reason: reason}); status(err) != http.StatusNotFound {
		t.Fatalf("suspend of no run: %v", err)
	}

	// A runtime without checkpoints says so, and does nothing.
	bare := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return f.d.Load(), time.Now() },
		runtime.NewWarm(f.be, runtime.NewRegistryArtifacts(t.TempDir())), f.store, time.Minute)
	t.Cleanup(func() { bare.Close() })
	srv2, err := runtime.NewServer(bare, nil, f.be, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	hs3 := httptest.NewServer(srv2)
	t.Cleanup(hs3.Close)
	c2, _ := runtimeapi.NewClient(hs3.URL, apiToken)
	for _, err := range []error{
		func() error {
			_, err := c2.SuspendRun(ctx, gr.RunID, runtimeapi.OperatorAction{Actor: actor, Reason: reason})
			return err
		}(),
		func() error {
			_, err := c2.ResumeRun(ctx, gr.RunID, runtimeapi.OperatorAction{Actor: actor, Reason: reason})
			return err
		}(),
	} {
		if status(err) != http.StatusNotImplemented || apiCode(err) != runtimeapi.CodeNoCheckpoints {
			t.Errorf("operator action on a runtime without checkpoints: %v", err)
		}
	}
}

func status(err error) int {
	var ae *runtimeapi.APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}
