package runtimeapi

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Codes of checkpoint answers.
const (
	// CodeSuspended: the run is suspended; resume it first (409).
	CodeSuspended = "suspended"
	// CodeCheckpointRefused: the checkpoint did not verify (signature,
	// attestation, tenant, run or generation); the reason says which (409).
	CodeCheckpointRefused = "checkpoint_refused"
	// CodeNoCheckpoints: the runtime keeps no checkpoints, or its backend
	// cannot freeze a sandbox (501).
	CodeNoCheckpoints = "checkpoints_unavailable"
	// CodeNotSuspended: a resume of a run that is not suspended (409).
	CodeNotSuspended = "not_suspended"
)

// CheckpointBody asks for a checkpoint (POST /v1/claims/{run}/checkpoint)
// or a suspend (POST /v1/claims/{run}/suspend) of an open run.
type CheckpointBody struct {
	// Token is the claim's current fencing token.
	Token string `json:"token"`
	// EventSeq is the job's event sequence at the checkpoint (0: no job).
	EventSeq int64 `json:"eventSeq,omitempty"`
}

// ResumeBody asks to resume a suspended run (POST
// /v1/claims/{run}/resume).
type ResumeBody struct {
	// Token is the token the run was suspended with.
	Token string `json:"token"`
	// By says what the restore proves, as question 6 records it:
	// RestoredByResume (the default), RestoredByCanary or RestoredByTest.
	By string `json:"by,omitempty"`
}

// CheckpointResult is a checkpoint the runtime wrote.
type CheckpointResult struct {
	RunID string `json:"runId"`
	// Checkpoint is its digest: the run manifest's
	// workspace_checkpoint_id.
	Checkpoint string `json:"checkpoint"`
	Parent     string `json:"parent,omitempty"`
	Generation string `json:"generation"`
	SandboxID  string `json:"sandboxId"`
	EventSeq   int64  `json:"eventSeq"`
	// EventSeqUnknown: the runtime took it without knowing the job's
	// event sequence (a rollout's drain); EventSeq says nothing.
	EventSeqUnknown bool      `json:"eventSeqUnknown,omitempty"`
	Created         time.Time `json:"created"`
	// Layers is how many layers it has, Reused how many its parent had.
	Layers int `json:"layers"`
	Reused int `json:"reused"`
	// FrozenMillis is how long the sandbox was frozen for the copy.
	FrozenMillis int64 `json:"frozenMillis"`
	// Suspended is true when the sandbox was deleted after it.
	Suspended bool `json:"suspended,omitempty"`
}

// Durable answers "what state is durable for this run, where is its
// head, and has restore been tested" (GET /v1/runs/{run}/durable).
type Durable struct {
	RunID string `json:"runId"`
	// Durable names what a checkpoint of the run holds (its workspace).
	Durable []string `json:"durable"`
	// Head is the run's latest checkpoint ("" when none), with when it
	// was taken and at which job event sequence.
	Head         string    `json:"head,omitempty"`
	HeadCreated  time.Time `json:"headCreated,omitzero"`
	HeadEventSeq int64     `json:"headEventSeq,omitempty"`
	// HeadEventSeqUnknown: the head was taken without knowing the job's
	// event sequence (a rollout's drain); HeadEventSeq says nothing.
	HeadEventSeqUnknown bool `json:"headEventSeqUnknown,omitempty"`
	// Checkpoints counts the run's checkpoints in the store.
	Checkpoints int `json:"checkpoints"`
	// Suspended says the run has no sandbox until it resumes.
	Suspended bool `json:"suspended,omitempty"`
	// LastRestore is the last verified restore of one of the run's
	// checkpoints (nil: never proved), and what did it.
	LastRestore *RestoreRecord `json:"lastRestore,omitempty"`
	// LastSuspend is the run's last suspend as the checkpoint store
	// recorded it (nil: never suspended): what, who and why.
	LastSuspend *SuspendRecord `json:"lastSuspend,omitempty"`
}

// SuspendRecord is one recorded suspend of a run.
type SuspendRecord struct {
	Checkpoint string    `json:"checkpoint"`
	At         time.Time `json:"at"`
	// By is what suspended it: "holder" (the claim's token), "operator"
	// (POST /v1/runs/{run}/suspend), "drain" (a drain deadline).
	By string `json:"by"`
	// Actor and Reason are the operator's ("" for the others).
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// RestoreRecord is one verified restore.
type RestoreRecord struct {
	Checkpoint string    `json:"checkpoint"`
	At         time.Time `json:"at"`
	// By is what restored it: RestoredByResume, RestoredByCanary,
	// RestoredByTest or RestoredByDrain.
	By string `json:"by"`
	// Into is the sandbox or directory restored into (no host path).
	Into string `json:"into,omitempty"`
	// Actor and Reason are the operator's when an operator resumed the
	// run (POST /v1/runs/{run}/resume); "" otherwise.
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// OperatorAction asks, with the runtime's own token and no claim token,
// to suspend (POST /v1/runs/{run}/suspend) or resume (POST
// /v1/runs/{run}/resume) a run. Both fields are required; the runtime
// records them with the suspend or the restore.
type OperatorAction struct {
	// Reason says why (1 to MaxReason bytes, no control characters).
	Reason string `json:"reason"`
	// Actor names who acted, as the caller knows them (the console: the
	// operator's tenant and token id, never a token): 1 to MaxActor
	// printable characters without spaces.
	Actor string `json:"actor"`
}

// Bounds of an OperatorAction.
const (
	MaxReason = 1000
	MaxActor  = 128
)

// ResumeResult is a run an operator resumed. The holder's token is
// fenced, as after a move: the holder adopts the new grant by claiming
// again with its request key.
type ResumeResult struct {
	RunID      string `json:"runId"`
	Checkpoint string `json:"checkpoint"`
	Generation string `json:"generation"`
	SandboxID  string `json:"sandboxId"`
	// AllocationAttempt is the run's attempt now.
	AllocationAttempt int `json:"allocationAttempt"`
}

// Checkpoint checkpoints an open run.
func (c *Client) Checkpoint(ctx context.Context, runID string, b CheckpointBody) (*CheckpointResult, error) {
	var out CheckpointResult
	if err := c.do(ctx, http.MethodPost, "/v1/claims/"+url.PathEscape(runID)+"/checkpoint", b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Suspend checkpoints an open run and deletes its sandbox.
func (c *Client) Suspend(ctx context.Context, runID string, b CheckpointBody) (*CheckpointResult, error) {
	var out CheckpointResult
	if err := c.do(ctx, http.MethodPost, "/v1/claims/"+url.PathEscape(runID)+"/suspend", b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Resume restores a suspended run into a new sandbox and returns its
// grant (a new attempt and token).
func (c *Client) Resume(ctx context.Context, runID string, b ResumeBody) (*Grant, error) {
	var out Grant
	if err := c.do(ctx, http.MethodPost, "/v1/claims/"+url.PathEscape(runID)+"/resume", b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SuspendRun suspends a run on the runtime's operator path: the runtime
// checkpoints it with its claim's current token and deletes its sandbox;
// the holder's next request is refused with CodeSuspended.
func (c *Client) SuspendRun(ctx context.Context, runID string, a OperatorAction) (*CheckpointResult, error) {
	var out CheckpointResult
	if err := c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(runID)+"/suspend", a, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResumeRun resumes a suspended run on the runtime's operator path.
func (c *Client) ResumeRun(ctx context.Context, runID string, a OperatorAction) (*ResumeResult, error) {
	var out ResumeResult
	if err := c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(runID)+"/resume", a, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Durable answers question 6 for a run.
func (c *Client) Durable(ctx context.Context, runID string) (*Durable, error) {
	var out Durable
	if err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID)+"/durable", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
