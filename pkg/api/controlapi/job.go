package controlapi

import (
	"time"
)

// State is where a job is in its life. Every transition is committed to the
// store before its effect.
type State string

// The states. Terminal states never change again; Unknown is visible and
// non-terminal: an outcome nobody confirmed, with an owner and a deadline.
const (
	Queued           State = "queued"
	Admitted         State = "admitted"
	Allocating       State = "allocating"
	Running          State = "running"
	Succeeded        State = "succeeded"
	Failed           State = "failed"
	Canceled         State = "canceled"
	DeadlineExceeded State = "deadline_exceeded"
	Refused          State = "refused"
	Unknown          State = "unknown"
)

// Terminal says the state never changes again.
func (s State) Terminal() bool {
	switch s {
	case Succeeded, Failed, Canceled, DeadlineExceeded, Refused:
		return true
	}
	return false
}

// Spec is what a tenant asks for: POST /v1/jobs.
type Spec struct {
	Pool    string `json:"pool"`
	Profile string `json:"profile"`
	// Commands run one after the other in one sandbox; the job fails at the
	// first that exits non-zero.
	Commands [][]string `json:"commands"`
	// DeadlineSeconds bounds the job from admission to its end; the
	// profile's maxDuration when 0, and never above it.
	DeadlineSeconds float64 `json:"deadlineSeconds,omitempty"`
	// CommandTimeoutSeconds bounds each command; the profile's
	// maxCommandDuration (or the deadline) when 0.
	CommandTimeoutSeconds float64 `json:"commandTimeoutSeconds,omitempty"`
	// IdempotencyKey (or the Idempotency-Key header): the same key returns
	// the same job, never a second one.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// ProfileRef is the capability profile a job resolved at submission: by
// name, and the config revision and digest of the file it read.
type ProfileRef struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	Revision string `json:"revision"`
	Digest   string `json:"digest"`
}

// Limits are what the job may use, resolved from the spec and the profile.
type Limits struct {
	Deadline       Duration `json:"deadline"`
	CommandTimeout Duration `json:"commandTimeout"`
	MaxOutputBytes int64    `json:"maxOutputBytes"`
	MaxOutputLines int64    `json:"maxOutputLines"`
}

// Cost is what the job's compute cost, from the price table.
type Cost struct {
	Currency string `json:"currency,omitempty"`
	// Known is false when the pool has no price: the cost is unknown, not
	// zero.
	Known bool `json:"known"`
	// RatePerHour is the pool class's active rate.
	RatePerHour float64 `json:"ratePerHour,omitempty"`
	// WorstCase is the deadline at the active rate, reserved at admission.
	WorstCase float64 `json:"worstCase,omitempty"`
	// Amount is what accrued: active time at the rate.
	Amount float64 `json:"amount"`
	// PricingRevision is the config revision of pricing.yaml used.
	PricingRevision string `json:"pricingRevision,omitempty"`
}

// CommandResult is one command's outcome.
type CommandResult struct {
	Argv     []string `json:"argv"`
	ExitCode *int     `json:"exitCode,omitempty"`
	TimedOut bool     `json:"timedOut,omitempty"`
	// Stop is how the command was stopped when it was: terminated (it
	// exited within the grace after SIGTERM) or killed (SIGKILL).
	Stop string `json:"stop,omitempty"`
	// Outcome names the sandbox limit that ended the command, if one did
	// (oom_killed, pids_exhausted, disk_full, cpu_time_exceeded).
	Outcome string  `json:"outcome,omitempty"`
	Seconds float64 `json:"seconds"`
	// EventsRejected counts, by reason, the events the command's workload
	// tried to report and the runner refused (oversized, malformed,
	// unknown_kind, flood, order, no_command).
	EventsRejected map[string]int `json:"eventsRejected,omitempty"`
}

// Transition is one state change, as committed.
type Transition struct {
	Seq    int       `json:"seq"`
	State  State     `json:"state"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

// Job is the durable record of one job: its intent and its whole story.
type Job struct {
	ID             string     `json:"id"`
	Tenant         string     `json:"tenant"`
	IdempotencyKey string     `json:"idempotencyKey"`
	Pool           string     `json:"pool"`
	Profile        ProfileRef `json:"profile"`
	ConfigRevision string     `json:"configRevision"`
	Commands       [][]string `json:"commands"`
	Limits         Limits     `json:"limits"`

	State State `json:"state"`
	// Reason is a bounded word for why the job is where it is
	// (exit_code, deadline, budget, dispatch_budget, canceled,
	// owner_lost...); Detail says it in a sentence.
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Owner and OwnerDeadline are set while the job is Unknown: who must
	// confirm its outcome, and by when.
	Owner         string     `json:"owner,omitempty"`
	OwnerDeadline *time.Time `json:"ownerDeadline,omitempty"`

	CreatedAt  time.Time  `json:"createdAt"`
	AdmittedAt *time.Time `json:"admittedAt,omitempty"`
	DeadlineAt *time.Time `json:"deadlineAt,omitempty"`
	StartedAt  *time.Time `json:"startedAt,omitempty"`
	EndedAt    *time.Time `json:"endedAt,omitempty"`

	// Attempt is the allocation attempt; RequestKey (job id and attempt)
	// goes with the claim so a crashed control plane finds the sandbox it
	// may have created instead of creating another.
	Attempt          int    `json:"attempt"`
	RequestKey       string `json:"requestKey,omitempty"`
	DispatchFailures int    `json:"dispatchFailures,omitempty"`
	// Replica is the control plane (host:pid:id) that dispatched the job.
	Replica    string `json:"replica,omitempty"`
	Runtime    string `json:"runtime,omitempty"`
	RunID      string `json:"runId,omitempty"`
	SandboxID  string `json:"sandboxId,omitempty"`
	Generation string `json:"generation,omitempty"`
	Adopted    bool   `json:"adopted,omitempty"`

	Results  []CommandResult `json:"results,omitempty"`
	ExitCode *int            `json:"exitCode,omitempty"`
	// StopOutcome is how the job's last command was stopped at a deadline,
	// a cancellation or a budget stop.
	StopOutcome string `json:"stopOutcome,omitempty"`
	// Output is the job's bounded output: its head and its tail, with a
	// marker where bytes or lines were dropped.
	Output             string `json:"output,omitempty"`
	OutputDroppedBytes int64  `json:"outputDroppedBytes,omitempty"`
	OutputDroppedLines int64  `json:"outputDroppedLines,omitempty"`

	Cost  Cost   `json:"cost"`
	Notes []Note `json:"notes,omitempty"`

	// Story is the job's committed transitions, oldest first.
	Story []Transition `json:"story,omitempty"`

	// CancelRequested is set by a cancel; the owner stops the job.
	CancelRequested bool `json:"cancelRequested,omitempty"`
	// Cancellation is the cancellation's record, step by step.
	Cancellation *Cancellation `json:"cancellation,omitempty"`
	// ResultPublished is when the final result's receipt came back from
	// every destination that requires it (validated delivery); Delivery
	// says how the job's deliveries stand. Both are filled by the server
	// from the output worker's records.
	ResultPublished *time.Time      `json:"resultPublished,omitempty"`
	Delivery        *DeliveryStatus `json:"delivery,omitempty"`
	// Stream is the head of the job's event stream, filled by the server:
	// the durable state a follower resumes from.
	Stream *StreamHead `json:"stream,omitempty"`
	// Checkpoint is the workspace checkpoint cancellation step 6
	// published for the job's run (nil: none was), as the runtime
	// answered it.
	Checkpoint *JobCheckpoint `json:"checkpoint,omitempty"`
}

// Note is something that happened to a job that is not a state: a profile
// that changed after submission, a dispatch retry.
type Note struct {
	At   time.Time `json:"at"`
	Text string    `json:"text"`
}

// Duration is a time.Duration written as Go's duration text in JSON.
type Duration time.Duration

// MarshalText writes "1m30s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads what MarshalText writes.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}
