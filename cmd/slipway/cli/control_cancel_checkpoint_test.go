package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// Cancellation step 6 on a runtime that keeps checkpoints: a running job
// is canceled, and before its sandbox is deleted the runtime checkpoints
// its workspace; the step is done and names the checkpoint, the run
// manifest and question 6 name the same one as the head, and the
// checkpoint, verified with the runtime's key and restored, holds the file
// the job wrote. The job's record carries the checkpoint and the run's
// durable head as the runtime answered them (the API's job, and job show's
// durable line). (TestControlCancel covers a runtime without checkpoints:
// the step is unavailable, the job has no checkpoint, and both say so.)
func TestControlCancelPublishesCheckpoint(t *testing.T) {
	dir := t.TempDir()
	priv, pub, err := sign.GenerateKeys([]byte("ckpt-pw"))
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "checkpoint.key")
	if err := os.WriteFile(keyFile, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COSIGN_PASSWORD", "ckpt-pw")
	w := newControlWorldWith(t, worldOptions{runtimeArgs: []string{"--checkpoint-key", keyFile}})
	ctx := context.Background()
	db := "sqlite:" + filepath.Join(w.dir, "control.db")
	tokFile := w.token(t, db, "acme")
	tok, _ := readToken(tokFile)
	cp := w.startControl(t, db)
	defer cp.kill9(t)
	c, _ := controlapi.NewClient(cp.url, tok)
	j, _, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard",
		Commands: [][]string{{"sh", "-c", "echo 'work in progress' > /workspace/kept.txt; echo started; sleep 60; echo never"}}})
	if err != nil {
		t.Fatal(err)
	}
	// The file is written once the command's output (stdout) says started.
	errStarted := errors.New("started")
	var startedSeq int64
	fctx, fcancel := context.WithTimeout(ctx, 90*time.Second)
	err = c.Follow(fctx, j.ID, controlapi.FollowOptions{}, func(e controlapi.Event) error {
		// the command's own output: the status event that starts it
		// carries its argv, which says "started" too
		if e.Kind == controlapi.KindStdout && strings.Contains(string(e.Data), "started") {
			startedSeq = e.Seq
			return errStarted
		}
		return nil
	})
	fcancel()
	if !errors.Is(err, errStarted) {
		t.Fatalf("following job %s for its output: %v", j.ID, err)
	}
	running := waitJob(t, c, j.ID, 60*time.Second, func(j *controlapi.Job) bool { return j.State == controlapi.Running })
	if _, err := c.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	got := waitJob(t, c, j.ID, 90*time.Second, func(j *controlapi.Job) bool { return j.State.Terminal() })
	if got.State != controlapi.Canceled || got.Cancellation == nil {
		t.Fatalf("canceled job: %s %s %+v", got.State, got.Detail, got.Cancellation)
	}
	var step *controlapi.CancelStep
	for i, s := range got.Cancellation.Steps {
		if s.Step == controlapi.StepCheckpoint {
			step = &got.Cancellation.Steps[i]
		}
	}
	if step == nil || step.Outcome != controlapi.StepDone || !strings.HasPrefix(step.Checkpoint, "sha256:") || !strings.Contains(step.Detail, step.Checkpoint) {
		t.Fatalf("checkpoint step: %+v", step)
	}
	m, err := w.rt.client.Run(ctx, running.RunID)
	if err != nil || m.WorkspaceCheckpointID != step.Checkpoint || m.Lifecycle.ResourcesReleased.IsZero() {
		t.Fatalf("run %s after the cancel: checkpoint %q released %v, %v; want %s", running.RunID, m.WorkspaceCheckpointID, m.Lifecycle.ResourcesReleased, err, step.Checkpoint)
	}
	d, err := w.rt.client.Durable(ctx, running.RunID)
	if err != nil || d.Head != step.Checkpoint {
		t.Fatalf("durable after the cancel: %+v, %v", d, err)
	}
	// The job's record, as the API returns it, carries what the runtime
	// answered: the checkpoint, the manifest's id, the run's head.
	jc := got.Checkpoint
	if jc == nil || jc.ID != step.Checkpoint || jc.RunID != running.RunID || jc.Runtime != running.Runtime || jc.SandboxID != running.SandboxID ||
		jc.Generation != m.Generation || jc.EventSeq != d.HeadEventSeq || !jc.Created.Equal(d.HeadCreated) || jc.Manifest != m.WorkspaceCheckpointID ||
		jc.Head != d.Head || !jc.HeadCreated.Equal(d.HeadCreated) || jc.HeadEventSeq != d.HeadEventSeq || jc.HeadEventSeqUnknown ||
		jc.Checkpoints != d.Checkpoints || jc.Checkpoints != 1 || !jc.LastRestore.IsZero() || d.LastRestore != nil || jc.HeadError != "" ||
		jc.ReadAt.Before(jc.Created) || jc.ReadAt.After(*got.EndedAt) {
		t.Fatalf("the job's checkpoint record: %+v\nthe runtime's: step %+v, manifest %s, durable %+v", jc, step, m.WorkspaceCheckpointID, d)
	}
	r := run(t, "", "job", "show", j.ID, "--server", cp.url, "--token-file", tokFile)
	for _, want := range []string{
		"its workspace's checkpoint " + jc.ID + ",\n          published by cancellation step 6 (run " + running.RunID + ", sandbox " + running.SandboxID,
		fmt.Sprintf("at event %d of the job)", jc.EventSeq),
		"run manifest: workspace_checkpoint_id " + jc.ID + " (this checkpoint)",
		"head:     " + jc.ID + " (this checkpoint)",
		"1 checkpoint of run " + running.RunID + "; restore never proved",
		"slipway checkpoint durable " + running.RunID,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("job show lacks %q:\n%s", want, r.stdout)
		}
	}
	if r.code != 0 || strings.Contains(r.stdout, "no workspace checkpoint") {
		t.Errorf("job show (exit %d) says no workspace checkpoint:\n%s", r.code, r.stdout)
	}
	// The checkpoint names the job's event sequence when it was taken: an
	// event of the job, at or after the output the workspace's file was
	// written before, and before the job's final state.
	seqs := map[int64]bool{}
	var final int64
	if err := c.Follow(ctx, j.ID, controlapi.FollowOptions{NoFollow: true}, func(e controlapi.Event) error {
		seqs[e.Seq] = true
		var sd controlapi.StateData
		if e.Kind == controlapi.KindState && json.Unmarshal(e.Data, &sd) == nil && sd.State == controlapi.Canceled {
			final = e.Seq
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if d.HeadEventSeqUnknown || d.HeadEventSeq < startedSeq || !seqs[d.HeadEventSeq] || final <= d.HeadEventSeq ||
		!strings.Contains(step.Detail, fmt.Sprintf("at event %d of the job", d.HeadEventSeq)) {
		t.Fatalf("the checkpoint's event sequence %d (unknown %v): want an event of the job from %d (the output) to before %d (canceled); step %q",
			d.HeadEventSeq, d.HeadEventSeqUnknown, startedSeq, final, step.Detail)
	}
	st, err := checkpoint.OpenStore(filepath.Join(w.dir, "runtime-state", serve.CheckpointDir))
	if err != nil {
		t.Fatal(err)
	}
	v, err := sign.LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "restored")
	if _, _, _, err := checkpoint.Restore(ctx, st, step.Checkpoint, v, checkpoint.Expect{Tenant: m.Tenant, Generations: []string{m.Generation}, RunID: running.RunID}, out); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "kept.txt")); err != nil || string(b) != "work in progress\n" {
		t.Errorf("kept.txt in the published checkpoint: %q, %v", b, err)
	}
}
