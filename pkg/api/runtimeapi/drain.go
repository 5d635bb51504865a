package runtimeapi

import (
	"context"
	"net/http"
	"net/url"
)

// CheckpointGenerationResult is POST
// /v1/pools/{pool}/generations/{generation}/checkpoint (a rollout's drain
// deadline with onDrainDeadline: checkpoint): each claim of the generation
// still open with a sandbox, suspended (checkpointed, its sandbox deleted)
// and resumed on the pool's active generation.
type CheckpointGenerationResult struct {
	// Moved are the runs resumed on the active generation, sorted by run.
	Moved []MovedRun `json:"moved"`
	// NotMoved are the runs that were not: still open on the generation,
	// or suspended at a checkpoint a resume did not take.
	NotMoved []NotMovedRun `json:"notMoved,omitempty"`
}

// MovedRun is one run moved through a checkpoint.
type MovedRun struct {
	RunID string `json:"runId"`
	// Checkpoint is the checkpoint it was suspended at and restored from.
	Checkpoint string `json:"checkpoint"`
	// From and To are the generations it ran on before and runs on now.
	From string `json:"from"`
	To   string `json:"to"`
	// SandboxID and AllocationAttempt are its new sandbox and attempt (the
	// owner's token is fenced: the owner adopts the new grant, as after a
	// move).
	SandboxID         string `json:"sandboxId"`
	AllocationAttempt int    `json:"allocationAttempt"`
}

// NotMovedRun is a run a generation's checkpoint did not move.
type NotMovedRun struct {
	RunID string `json:"runId"`
	// Suspended says the run is suspended at Checkpoint (the suspend
	// worked, the resume did not); otherwise it is still open where it was.
	Suspended  bool   `json:"suspended,omitempty"`
	Checkpoint string `json:"checkpoint,omitempty"`
	// Code is the runtimeapi code of the failure, Reason what failed.
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// CheckpointGeneration suspends the open claims of a generation of pool
// and resumes them on the pool's active generation.
func (c *Client) CheckpointGeneration(ctx context.Context, pool, gen string) (*CheckpointGenerationResult, error) {
	var out CheckpointGenerationResult
	if err := c.do(ctx, http.MethodPost, "/v1/pools/"+url.PathEscape(pool)+"/generations/"+url.PathEscape(gen)+"/checkpoint", struct{}{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
