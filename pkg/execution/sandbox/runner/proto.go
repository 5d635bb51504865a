package runner

import (
	"errors"
	"time"
)

// Protocol versions. A request carries the version its client speaks; a
// runner answers every version from MinProtocolVersion to ProtocolVersion
// and refuses others with ErrCodeVersion. A generation's
// compatibility.runnerProtocol range is checked against these numbers (the
// runner image records ProtocolVersion in its config).
const (
	ProtocolVersion    = 1
	MinProtocolVersion = 1
)

// Named defaults and bounds of the protocol.
const (
	// DefaultMaxOutput is how many bytes of stdout and stderr together an
	// exec streams when ExecRequest.MaxOutput is 0.
	DefaultMaxOutput = 1 << 20
	// MaxOutputLimit is the largest ExecRequest.MaxOutput a runner accepts.
	MaxOutputLimit = 256 << 20
	// DefaultGraceMs is how long a stop waits between SIGTERM and SIGKILL
	// when ExecRequest.GraceMs is 0; MaxGraceMs is the largest GraceMs.
	DefaultGraceMs = 2000
	MaxGraceMs     = 60000
	// MaxRequestBytes bounds one request line (ExecRequest.Stdin included).
	MaxRequestBytes = 8 << 20
	// MaxFrameBytes bounds one frame line a client reads.
	MaxFrameBytes = 1 << 20
	// ChunkBytes is the most output bytes one output frame carries.
	ChunkBytes = 32 << 10
)

// Operations.
const (
	OpIdentity = "identity" // answered by a FrameIdentity
	OpPing     = "ping"     // answered by a FramePong
	OpExec     = "exec"     // answered by FrameOutput frames, then one FrameExit
	OpCancel   = "cancel"   // sent during an exec: kill the command
)

// EnvTraceParent is the environment variable a command gets
// ExecRequest.TraceParent in.
const EnvTraceParent = "TRACEPARENT"

// Frame types.
const (
	FrameIdentity = "identity"
	FramePong     = "pong"
	FrameOutput   = "output"
	FrameExit     = "exit"
	FrameError    = "error"
	// FrameEvent carries an Event during an exec that asked for them
	// (ExecRequest.Events): the workload's own (see EnvEvents) and the
	// runner's EventPayloadFetched.
	FrameEvent = "event"
)

// Stop outcomes (ExitStatus.Stop).
const (
	StopTerminated = "terminated"
	StopKilled     = "killed"
)

// Output streams.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// Error codes of a FrameError.
const (
	ErrCodeBadRequest = "bad-request" // malformed or unknown request
	ErrCodeVersion    = "version"     // protocol version not supported
	ErrCodeStart      = "start"       // the command could not be started
	ErrCodeInternal   = "internal"
)

// Request is one line a client sends: JSON, terminated by a newline. A
// connection carries any number of identity and ping requests; an exec
// request takes the connection over until its FrameExit, after which the
// runner closes it. Closing the connection during an exec (or sending an
// OpCancel request) kills the command.
type Request struct {
	Version int          `json:"v"`
	Op      string       `json:"op"`
	Exec    *ExecRequest `json:"exec,omitempty"`
}

// ExecRequest runs one command.
type ExecRequest struct {
	// Argv is the command; Argv[0] without a slash is looked up in the PATH
	// of the command's environment.
	Argv []string `json:"argv"`
	// Env is added to the runner's environment (the sandbox's), replacing
	// variables of the same name.
	Env map[string]string `json:"env,omitempty"`
	// Dir is the working directory; the workspace when empty.
	Dir string `json:"dir,omitempty"`
	// Stdin is the command's whole standard input; /dev/null when empty.
	Stdin []byte `json:"stdin,omitempty"`
	// TimeoutMs stops the command's process group after this many
	// milliseconds; 0 means none (the caller's context still applies). A
	// stop, at the timeout or when the exec is cancelled, sends SIGTERM to
	// the process group, waits GraceMs, then sends SIGKILL; ExitStatus.Stop
	// says which of them ended the command.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// GraceMs is how long a stop waits after SIGTERM before SIGKILL:
	// DefaultGraceMs when 0, at most MaxGraceMs.
	GraceMs int64 `json:"graceMs,omitempty"`
	// MaxOutput bounds the bytes of stdout and stderr together that are
	// streamed; later output is counted and dropped, and the exit says
	// Truncated. DefaultMaxOutput when 0, at most MaxOutputLimit.
	MaxOutput int64 `json:"maxOutput,omitempty"`
	// Events asks for FrameEvent frames during the exec: the runner's
	// EventPayloadFetched once the command started, then the workload's
	// events as they come. A runner that predates them ignores it; a
	// client that does not set it gets none.
	Events bool `json:"events,omitempty"`
	// TraceParent is a W3C trace context traceparent
	// ("00-<32 hex trace id>-<16 hex span id>-<2 hex flags>") the command
	// gets as TRACEPARENT in its environment, over any TRACEPARENT of Env:
	// its span id is the span the caller records for the command's time in
	// the runner, so the workload's own spans are children of it. Empty:
	// none. A malformed value is refused with ErrCodeBadRequest. Added in
	// protocol 1 (additive: older runners ignore it).
	TraceParent string `json:"traceparent,omitempty"`
}

// ExecTiming is the runner's own clock around one exec, for the caller to
// turn into spans: when the request was read, when the command's process
// started, and when it exited.
type ExecTiming struct {
	Received time.Time `json:"received"`
	Started  time.Time `json:"started,omitzero"`
	Exited   time.Time `json:"exited,omitzero"`
}

// Frame is one line a runner sends: JSON, terminated by a newline. Type
// says which field is set.
type Frame struct {
	Type     string      `json:"type"`
	Identity *Identity   `json:"identity,omitempty"`
	Pong     *Pong       `json:"pong,omitempty"`
	Stream   string      `json:"stream,omitempty"` // FrameOutput: StreamStdout or StreamStderr
	Data     []byte      `json:"data,omitempty"`   // FrameOutput: at most ChunkBytes (base64 in JSON)
	Exit     *ExitStatus `json:"exit,omitempty"`
	Error    *Error      `json:"error,omitempty"`
	Event    *Event      `json:"event,omitempty"` // FrameEvent
}

// Identity is what a runner says about itself.
type Identity struct {
	// RunnerBinarySHA256 is "sha256:<hex>" of the runner's own executable, read
	// through /proc/self/exe when it started: the binary's hash, not the
	// digest of the runner image that ships it.
	RunnerBinarySHA256 string `json:"runnerBinarySha256"`
	// LegacyRunnerDigest is the same hash under the name runners before
	// runnerBinarySha256 used; a runner sends both, and the client reads it
	// only when runnerBinarySha256 is absent.
	LegacyRunnerDigest string `json:"runnerDigest,omitempty"`
	// Generation and SandboxID are the ones the runner was started for.
	Generation string `json:"generation"`
	SandboxID  string `json:"sandboxId"`
	// ProtocolVersion and MinProtocolVersion are the range it speaks.
	ProtocolVersion    int `json:"protocolVersion"`
	MinProtocolVersion int `json:"minProtocolVersion"`
	// Pid is the runner's pid inside the sandbox; Started when it started.
	Pid     int       `json:"pid"`
	Started time.Time `json:"started"`
}

// Pong answers a ping.
type Pong struct {
	Time    time.Time `json:"time"`    // the runner's clock
	Running int       `json:"running"` // commands running now
	// EventsRejected counts the workload's events refused since the
	// runner started, by reason.
	EventsRejected map[string]int `json:"eventsRejected,omitempty"`
}

// ExitStatus ends an exec.
type ExitStatus struct {
	// ExitCode is the command's exit status, -1 when a signal killed it.
	ExitCode int `json:"exitCode"`
	// Signal names the signal that killed the command ("killed"), if any.
	Signal string `json:"signal,omitempty"`
	// TimedOut says TimeoutMs passed and the process group was stopped.
	TimedOut bool `json:"timedOut,omitempty"`
	// Cancelled says the client cancelled or went away and the process
	// group was stopped.
	Cancelled bool `json:"cancelled,omitempty"`
	// Stop says how a stop (TimedOut or Cancelled) ended the command: ""
	// when the command exited by itself, StopTerminated when it exited
	// within the grace after SIGTERM, StopKilled when it needed SIGKILL.
	Stop string `json:"stop,omitempty"`
	// Truncated says output beyond MaxOutput was dropped; OutputBytes is
	// how much the command wrote in all.
	Truncated   bool  `json:"truncated,omitempty"`
	OutputBytes int64 `json:"outputBytes"`
	// Outcome names the sandbox limit that ended the command's work
	// (sandbox.Outcome: oom_killed, pids_exhausted, disk_full,
	// cpu_time_exceeded). The host sets it from the sandbox's counters;
	// the runner never does.
	Outcome string `json:"outcome,omitempty"`
	// DurationMs is the wall-clock time from start to exit.
	DurationMs int64 `json:"durationMs"`
	// EventsRejected counts, by reason (RejectOversized ...), the events
	// the workload tried to report while the command ran and the runner
	// refused; left out when none was (and when the exec did not ask for
	// events).
	EventsRejected map[string]int `json:"eventsRejected,omitempty"`
	// Timing is the runner's clock around the exec (added in protocol 1,
	// additive: nil from older runners).
	Timing *ExecTiming `json:"timing,omitempty"`
}

// Error is a refusal or failure the runner reports.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return "runner: " + e.Code + ": " + e.Message }

// Is makes errors.Is(err, ErrStart) and friends work on a decoded Error.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrRemote:
		return true
	case ErrStart:
		return e.Code == ErrCodeStart
	case ErrVersion:
		return e.Code == ErrCodeVersion
	}
	return false
}

// Error families: one errors.Is covers a class.
var (
	// ErrRemote: the runner answered with an Error frame.
	ErrRemote = errors.New("runner: refused")
	// ErrStart: the command could not be started (not found, not
	// executable, bad working directory). Also an ErrRemote.
	ErrStart = errors.New("runner: command did not start")
	// ErrVersion: the runner does not speak the client's protocol version.
	// Also an ErrRemote.
	ErrVersion = errors.New("runner: protocol version not supported")
	// ErrProtocol: the peer broke the protocol (a malformed, oversized or
	// unexpected frame, or the connection ended early).
	ErrProtocol = errors.New("runner: protocol error")
	// ErrUnavailable: the runner could not be reached.
	ErrUnavailable = errors.New("runner: unreachable")
)

// ValidTraceParent says whether s is a W3C traceparent of version 00:
// "00-" then 32 lower-case hex digits of a trace id that are not all zero,
// "-", 16 of a span id that are not all zero, "-", 2 of flags.
func ValidTraceParent(s string) bool {
	if len(s) != 55 || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return false
	}
	hex := func(p string) bool {
		nonzero := false
		for i := 0; i < len(p); i++ {
			c := p[i]
			switch {
			case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
				nonzero = nonzero || c != '0'
			default:
				return false
			}
		}
		return nonzero
	}
	return hex(s[3:35]) && hex(s[36:52]) && (hex(s[53:55]) || s[53:55] == "00")
}
