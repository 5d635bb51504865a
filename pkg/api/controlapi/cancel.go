package controlapi

import "time"

// Cancellation is the record of a job's cancellation: the seed's ten steps,
// each persisted with its outcome as it happens. A job is canceled only
// once the effects are observed (the runtime says the sandbox was released
// and refuses the claim's token); until then it stays canceling, and a
// cleanup that cannot be confirmed leaves it canceling with reason
// cleanup_incomplete, an owner and a deadline.
type Cancellation struct {
	// Fence goes up with every cancel request; a step records the fence it
	// ran under.
	Fence       int       `json:"fence"`
	RequestedAt time.Time `json:"requestedAt"`
	// Reason is why it was canceled, as the request said it (the
	// console asks for one); RequestedBy the id of the token that asked.
	// A later request with a reason replaces both.
	Reason      string       `json:"reason,omitempty"`
	RequestedBy string       `json:"requestedBy,omitempty"`
	Steps       []CancelStep `json:"steps"`
}

// CancelRequest is the body of POST /v1/jobs/{id}/cancel (optional: a
// cancel without a body records no reason).
type CancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

// MaxCancelReason bounds a cancel reason, in bytes.
const MaxCancelReason = 1024

// CancelStep is one step's outcome: done, not_applicable, unavailable or
// failed.
type CancelStep struct {
	Step    string    `json:"step"`
	Outcome string    `json:"outcome"`
	Fence   int       `json:"fence"`
	At      time.Time `json:"at"`
	Detail  string    `json:"detail,omitempty"`
	// Checkpoint is, on the checkpoint step done, the digest of the
	// checkpoint published (the run manifest's workspace_checkpoint_id).
	Checkpoint string `json:"checkpoint,omitempty"`
}

// JobCheckpoint is the workspace checkpoint cancellation step 6 published
// for a job's run, every field read back from the runtime: its answer to
// the checkpoint (POST /v1/claims/{run}/checkpoint), then, after the
// run's release, its answer to question 6 for the run (GET
// /v1/runs/{run}/durable) and the run manifest's workspace_checkpoint_id.
// The control plane records them when step 6 is committed; a restore
// proved later is the runtime's to answer (slipway checkpoint durable).
type JobCheckpoint struct {
	// ID is the checkpoint's digest as the runtime's checkpoint answer
	// gave it; RunID, Runtime, Generation and SandboxID say of what.
	ID         string `json:"id"`
	RunID      string `json:"runId"`
	Runtime    string `json:"runtime"`
	Generation string `json:"generation"`
	SandboxID  string `json:"sandboxId"`
	// EventSeq is the job's event sequence the checkpoint's attestation
	// names; Created when the runtime took it.
	EventSeq int64     `json:"eventSeq"`
	Created  time.Time `json:"created"`
	// Manifest is the run manifest's workspace_checkpoint_id read after
	// the release ("" when the manifest could not be read).
	Manifest string `json:"manifest,omitempty"`
	// Head is the run's durable head as the runtime answered question 6
	// at ReadAt (the latest of its Checkpoints checkpoints, taken at
	// HeadCreated and at HeadEventSeq of the job); LastRestore and
	// LastRestoreBy the last verified restore of one of them then (zero:
	// never proved). HeadError says why the answer could not be read
	// (then the head fields are empty).
	Head         string    `json:"head,omitempty"`
	HeadCreated  time.Time `json:"headCreated,omitzero"`
	HeadEventSeq int64     `json:"headEventSeq,omitempty"`
	// HeadEventSeqUnknown: the head was taken without the job's event
	// sequence (a rollout's drain); HeadEventSeq says nothing.
	HeadEventSeqUnknown bool      `json:"headEventSeqUnknown,omitempty"`
	Checkpoints         int       `json:"checkpoints,omitempty"`
	LastRestore         time.Time `json:"lastRestore,omitzero"`
	LastRestoreBy       string    `json:"lastRestoreBy,omitempty"`
	ReadAt              time.Time `json:"readAt,omitzero"`
	HeadError           string    `json:"headError,omitempty"`
}

// The cancellation steps, in order.
const (
	StepRequest             = "request"
	StepStopCommands        = "stop_commands"
	StepSignalRunner        = "signal_runner"
	StepEndWork             = "end_work"
	StepReconcileDeliveries = "reconcile_deliveries"
	StepCheckpoint          = "checkpoint"
	StepCleanupHooks        = "cleanup_hooks"
	StepRevoke              = "revoke"
	StepDeleteSandbox       = "delete_sandbox"
	StepFinal               = "final"
)

// Step outcomes.
const (
	StepDone          = "done"
	StepNotApplicable = "not_applicable"
	StepUnavailable   = "unavailable"
	StepFailed        = "failed"
)

// Canceling is the state of a job whose cancellation is under way: active
// (it keeps its slot) until its effects are observed.
const Canceling State = "canceling"

// Settled says the step was recorded done or otherwise settled (any
// outcome but failed) under any fence.
func (c *Cancellation) Settled(step string) bool {
	for _, s := range c.Steps {
		if s.Step == step && s.Outcome != StepFailed {
			return true
		}
	}
	return false
}
