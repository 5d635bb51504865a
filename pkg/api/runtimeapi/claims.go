package runtimeapi

import (
	"encoding/json"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// ClaimBody is the body of POST /v1/pools/{pool}/claims.
//
// RequestKey (1 to 128 characters of [A-Za-z0-9._:-]) makes the claim
// idempotent: while the claim it made is open, the same key answers that
// claim's grant again with 200 and "adopted": true (a new claim is 201);
// a key whose claim has ended is refused with 409 (CodeRequestKeyUsed).
type ClaimBody struct {
	Tenant          string  `json:"tenant,omitempty"`
	SessionID       string  `json:"sessionId,omitempty"`
	DeadlineSeconds float64 `json:"deadlineSeconds,omitempty"`
	RequestKey      string  `json:"requestKey,omitempty"`
	// ControlPlane is the control plane that sends the claim, as it
	// measured itself; the runtime records it in the run manifest's
	// served_by.
	ControlPlane *runmanifest.Process `json:"controlPlane,omitempty"`
}

// Grant is a claim's current allocation: the answer to a claim, and what
// the runtime says of an open claim after it moved.
type Grant struct {
	RunID             string `json:"runId"`
	SandboxID         string `json:"sandboxId"`
	Generation        string `json:"generation"`
	Warm              bool   `json:"warm"`
	AllocationAttempt int    `json:"allocationAttempt"`
	// Token fences this attempt: requests must carry it.
	Token string `json:"token"`
	// RequestKey is the claim request's key, when it carried one.
	RequestKey string `json:"requestKey,omitempty"`
	// Adopted says this grant answers a request whose key named a claim
	// that was already open: the same claim, not a new one.
	Adopted bool `json:"adopted,omitempty"`
}

// ExecBody is the body of POST /v1/claims/{run}/exec.
type ExecBody struct {
	Token string            `json:"token"`
	Argv  []string          `json:"argv"`
	Env   map[string]string `json:"env,omitempty"`
	Dir   string            `json:"dir,omitempty"`
	// TimeoutSeconds stops the command after this long (0: none): SIGTERM
	// to its process group, GraceSeconds later SIGKILL. ExecResult.Stop
	// says which ended it.
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
	// GraceSeconds is the wait between SIGTERM and SIGKILL: 2 when 0, at
	// most 60.
	GraceSeconds float64 `json:"graceSeconds,omitempty"`
	// MaxOutput bounds the output kept: stdout and stderr together (the
	// first MaxOutput bytes) without KeepTail, each stream with it. The
	// runner's default (1 MiB) when 0, at most its limit (MaxOutputLimit).
	MaxOutput int64 `json:"maxOutput,omitempty"`
	// KeepTail keeps, per stream, the first MaxOutput/2 bytes and the last
	// MaxOutput/2, with the line "\n[... N bytes dropped ...]\n" between
	// them when bytes were dropped: the end of a command stopped at its
	// deadline is kept. The runtime bounds the streams itself, in memory
	// that never exceeds MaxOutput per stream; the runner still drops
	// whatever the command writes beyond MaxOutputLimit bytes in all, so
	// past that the tail kept is not the command's last output.
	KeepTail bool `json:"keepTail,omitempty"`
	// Stream answers with the output as it is produced: NDJSON ExecFrames
	// (stdout and stderr chunks, then the exit), instead of one ExecResult
	// at exit (Client.ExecStream). MaxOutput then bounds what is streamed
	// (MaxOutputLimit when 0); KeepTail does not apply.
	Stream bool `json:"stream,omitempty"`
	// Events, with Stream, also answers with the command's events as
	// ExecFrames with Event set, between its output in the order they
	// came (Client.ExecStreamEvents): the workload's own (slipway-runner
	// event) and payload_fetched. A client that does not set it gets none.
	Events bool `json:"events,omitempty"`
}

// WorkloadEvent is an event of a running command: Kind is one the
// workload reports (model_request, first_output, tool_call, file, diff,
// status) or the runner's payload_fetched; At is the runner's clock; Data
// a JSON object (at most 16 KiB).
type WorkloadEvent struct {
	Kind string          `json:"kind"`
	At   time.Time       `json:"at"`
	Data json.RawMessage `json:"data,omitempty"`
}

// MaxOutputLimit is the most output (bytes) an exec may ask to keep: the
// runner's limit (the runtime refuses more with 400).
const MaxOutputLimit = 256 << 20

// ExecResult answers an exec.
type ExecResult struct {
	ExitCode int    `json:"exitCode"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// Truncated says output was dropped; DroppedBytes counts it.
	Truncated    bool  `json:"truncated"`
	DroppedBytes int64 `json:"droppedBytes"`
	TimedOut     bool  `json:"timedOut"`
	// Stop says how a stop (at the timeout, or when the exec was
	// cancelled) ended the command: "" (it exited by itself),
	// "terminated" (it exited within the grace after SIGTERM) or "killed"
	// (it needed SIGKILL).
	Stop string `json:"stop,omitempty"`
	// Outcome names the sandbox limit that ended the command, if one did
	// (oom_killed, pids_exhausted, disk_full, cpu_time_exceeded).
	Outcome string `json:"outcome,omitempty"`
	// EventsRejected counts, by reason, the events the workload tried to
	// report while the command ran and the runner refused (oversized,
	// malformed, unknown_kind, flood, order, no_command).
	EventsRejected map[string]int `json:"eventsRejected,omitempty"`
}

// Streams of a streamed exec's output frames.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// ExecFrame is one line of a streamed exec's answer (ExecBody.Stream):
// output chunks in the order the command wrote them, then exactly one
// Exit, or an Error when the exec failed after output began.
type ExecFrame struct {
	// Stream is stdout or stderr; Data its chunk.
	Stream string `json:"stream,omitempty"`
	Data   []byte `json:"data,omitempty"`
	// Exit ends a streamed exec: the ExecResult without the output.
	Exit *ExecResult `json:"exit,omitempty"`
	// Error, Code and Status: the exec failed after the answer began
	// (Status and Code are what the buffered form would have answered).
	Error  string `json:"error,omitempty"`
	Code   string `json:"code,omitempty"`
	Status int    `json:"status,omitempty"`
	// ErrorID is the error id of an internal error (ErrorBody.ID).
	ErrorID string `json:"errorId,omitempty"`
	// Event is one of the command's events (ExecBody.Events).
	Event *WorkloadEvent `json:"event,omitempty"`
}

// MaxFrameBytes bounds one line of a streamed exec's answer as a client
// reads it: a chunk of output the runner sends (at most 1 MiB), base64
// in JSON, with room to spare.
const MaxFrameBytes = 4 << 20

// ReleaseBody is the body of POST /v1/claims/{run}/release.
type ReleaseBody struct {
	Token    string `json:"token"`
	ExitCode *int   `json:"exitCode,omitempty"`
	// PostHookComplete is when the control plane's post-run step was done
	// (every output and event of the job committed to its stream); the
	// run's manifest records it as post_hook_complete.
	PostHookComplete *time.Time `json:"postHookComplete,omitempty"`
}

// ReleaseResult answers a release.
type ReleaseResult struct {
	Released string `json:"released"`
}

// IdentityBody is the body of POST /v1/claims/{run}/identity.
type IdentityBody struct {
	Token string `json:"token"`
}

// ClaimIdentity answers POST /v1/claims/{run}/identity: what the runner of
// the claim's sandbox says about itself, asked when the request came (not
// what was recorded at the claim), with what the runtime holds of the
// claim to check it against.
type ClaimIdentity struct {
	RunID             string `json:"runId"`
	SandboxID         string `json:"sandboxId"`
	Generation        string `json:"generation"`
	AllocationAttempt int    `json:"allocationAttempt"`
	// RunnerPath is the runner binary's path inside the sandbox (its
	// probes run from there).
	RunnerPath string `json:"runnerPath"`
	// Runner is the runner's own answer: its binary's sha256, the
	// generation and sandbox it was started for, its protocols.
	Runner RunnerIdentity `json:"runner"`
}
