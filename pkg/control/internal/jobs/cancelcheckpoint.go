package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// cancelCheckpoint is cancellation step 6, taken while the claim's sandbox
// still exists (before the release deletes it): a runtime that keeps
// checkpoints freezes the sandbox and publishes its workspace as a signed
// checkpoint (the run manifest's workspace_checkpoint_id names it); one
// that does not, or a checkpoint that fails, leaves the step unavailable
// with the reason. It returns the step's outcome, its detail and the
// checkpoint's digest ("" when none).
func cancelCheckpoint(ctx context.Context, rt Runtime, runID, grant string) (outcome, detail, digest string) {
	if grant == "" {
		return controlapi.StepUnavailable, fmt.Sprintf("run %s: its claim had ended before the cancel: no sandbox left to checkpoint", runID), ""
	}
	res, err := rt.Client.Checkpoint(ctx, runID, runtimeapi.CheckpointBody{Token: grant})
	var api *runtimeapi.APIError
	switch {
	case err == nil:
		return controlapi.StepDone, fmt.Sprintf("checkpoint %s of run %s (its workspace, frozen %d ms, %d of %d layers new) published by runtime %s before its sandbox was deleted",
			res.Checkpoint, runID, res.FrozenMillis, res.Layers-res.Reused, res.Layers, rt.Name), res.Checkpoint
	case errors.As(err, &api) && api.Code == runtimeapi.CodeNoCheckpoints:
		return controlapi.StepUnavailable, fmt.Sprintf("runtime %s keeps no checkpoints: %s", rt.Name, api.Reason), ""
	default:
		return controlapi.StepUnavailable, fmt.Sprintf("the checkpoint of run %s failed, none is published: %v", runID, err), ""
	}
}
