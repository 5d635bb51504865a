package jobs

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
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
// checkpoint's digest ("" when none).
func (e *Engine) cancelCheckpoint(ctx context.Context, id string, rt Runtime, runID, grant string) (outcome, detail, digest string) {
	if grant == "" {
		return controlapi.StepUnavailable, fmt.Sprintf("run %s: its claim had ended before the cancel: no sandbox left to checkpoint", runID), ""
	}
	head, _, err := e.st.ReadEvents(ctx, id, math.MaxInt64, 0)
	if err != nil {
		return controlapi.StepUnavailable, fmt.Sprintf("the event sequence of job %s could not be read, no checkpoint of run %s is taken: %v", id, runID, err), ""
	}
	res, err := rt.Client.Checkpoint(ctx, runID, runtimeapi.CheckpointBody{Token: grant, EventSeq: head.Last})
	var api *runtimeapi.APIError
	switch {
	case err == nil:
		return controlapi.StepDone, fmt.Sprintf("checkpoint %s of run %s (its workspace at event %d of the job, frozen %d ms, %d of %d layers new) published by runtime %s before its sandbox was deleted",
			res.Checkpoint, runID, res.EventSeq, res.FrozenMillis, res.Layers-res.Reused, res.Layers, rt.Name), res.Checkpoint
	case errors.As(err, &api) && api.Code == runtimeapi.CodeNoCheckpoints:
		return controlapi.StepUnavailable, fmt.Sprintf("runtime %s keeps no checkpoints: %s", rt.Name, api.Reason), ""
	default:
		return controlapi.StepUnavailable, fmt.Sprintf("the checkpoint of run %s failed, none is published: %v", runID, err), ""
	}
}
