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
