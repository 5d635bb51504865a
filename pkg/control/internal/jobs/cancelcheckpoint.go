package jobs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// cancelCheckpoint is cancellation step 6, taken while the claim's sandbox
// still exists (before the release deletes it): a runtime that keeps
// checkpoints freezes the sandbox and publishes its workspace as a signed
// checkpoint (the run manifest's workspace_checkpoint_id names it); one
// that does not, or a checkpoint that fails, leaves the step unavailable
// with the reason. The checkpoint's attestation names the job's event
// sequence: the last event of job id this control plane had committed
// when it asked (the commands were stopped and the runner signalled
// before, so the workspace holds what those events describe); when that
// cannot be read no checkpoint is taken, rather than one naming a
// sequence nobody read. It returns the step's outcome, its detail and the
// runtime's answer (nil when no checkpoint was published).
func (e *Engine) cancelCheckpoint(ctx context.Context, id string, rt Runtime, runID, grant string) (outcome, detail string, res *runtimeapi.CheckpointResult) {
	if grant == "" {
		return controlapi.StepUnavailable, fmt.Sprintf("run %s: its claim had ended before the cancel: no sandbox left to checkpoint", runID), nil
	}
	head, _, err := e.st.ReadEvents(ctx, id, math.MaxInt64, 0)
	if err != nil {
		return controlapi.StepUnavailable, fmt.Sprintf("the event sequence of job %s could not be read, no checkpoint of run %s is taken: %v", id, runID, err), nil
	}
	res, err = rt.Client.Checkpoint(ctx, runID, runtimeapi.CheckpointBody{Token: grant, EventSeq: head.Last})
	var api *runtimeapi.APIError
	switch {
	case err == nil:
		return controlapi.StepDone, fmt.Sprintf("checkpoint %s of run %s (its workspace at event %d of the job, frozen %d ms, %d of %d layers new) published by runtime %s before its sandbox was deleted",
			res.Checkpoint, runID, res.EventSeq, res.FrozenMillis, res.Layers-res.Reused, res.Layers, rt.Name), res
	case errors.As(err, &api) && api.Code == runtimeapi.CodeNoCheckpoints:
		return controlapi.StepUnavailable, fmt.Sprintf("runtime %s keeps no checkpoints: %s", rt.Name, api.Reason), nil
	default:
		return controlapi.StepUnavailable, fmt.Sprintf("the checkpoint of run %s failed, none is published: %v", runID, err), nil
	}
}

// jobCheckpoint is the job's record of the checkpoint step 6 published:
// the runtime's answer to the checkpoint, the run manifest m read after
// the release (nil: unreadable), and the runtime's answer to question 6
// for the run, asked now (after the release, so it is what stays).
func jobCheckpoint(ctx context.Context, rt Runtime, res *runtimeapi.CheckpointResult, m *runmanifest.Manifest) *controlapi.JobCheckpoint {
	jc := &controlapi.JobCheckpoint{ID: res.Checkpoint, RunID: res.RunID, Runtime: rt.Name, Generation: res.Generation,
		SandboxID: res.SandboxID, EventSeq: res.EventSeq, Created: res.Created.UTC()}
	if m != nil {
		jc.Manifest = m.WorkspaceCheckpointID
	}
	d, err := rt.Client.Durable(ctx, res.RunID)
	jc.ReadAt = time.Now().UTC()
	if err != nil {
		jc.HeadError = fmt.Sprintf("runtime %s: question 6 for run %s: %v", rt.Name, res.RunID, err)
		return jc
	}
	jc.Head, jc.HeadCreated, jc.HeadEventSeq, jc.HeadEventSeqUnknown, jc.Checkpoints = d.Head, d.HeadCreated.UTC(), d.HeadEventSeq, d.HeadEventSeqUnknown, d.Checkpoints
	if r := d.LastRestore; r != nil {
		jc.LastRestore, jc.LastRestoreBy = r.At.UTC(), r.By
	}
	return jc
}
