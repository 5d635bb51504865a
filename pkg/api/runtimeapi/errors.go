package runtimeapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Codes of the runtime's error answers: the "code" of the JSON error body,
// stable and machine-readable (the "error" beside it is the reason, for
// people). A client branches on APIError.Code, never on the reason's text.
const (
	// CodeStale: the runtime's view of the config repository is older than
	// its maximum staleness, or older than the cluster's (it routed the
	// claim to a generation a rollout has drained since, and reads the
	// repository again); claims wait for a fresh one (503, Retry-After).
	CodeStale = "stale"
	// CodeNoActiveGeneration: the pool has no active generation to claim
	// from (409).
	CodeNoActiveGeneration = "no_active_generation"
	// CodeRequestKeyUsed: the claim's request key named a claim that has
	// ended; its work must not run again (409).
	CodeRequestKeyUsed = "request_key_used"
	// CodeNoPool: the runtime serves no pool of that name (404).
	CodeNoPool = "no_pool"
	// CodeNoClaim: no claim with that run id is open (404).
	CodeNoClaim = "no_claim"
	// CodeFenced: the request carried a fencing token of an earlier
	// allocation attempt, or its attempt ended while it ran (409); the
	// claim's current grant says what the attempt is now.
	CodeFenced = "fenced"
	// CodeNotFound: no run manifest has that run id (404).
	CodeNotFound = "not_found"
	// CodeProofRefused: the runtime refused to run the proof (409).
	CodeProofRefused = "proof_refused"
	// CodeInvalid: the request was refused as it stands (400): a body or
	// query that does not parse, a value out of range.
	CodeInvalid = "invalid"
	// CodeUnauthorized: the request's bearer token is not the runtime's
	// (401; the runtime sends no body then).
	CodeUnauthorized = "unauthorized"
	// CodeDraining: the runtime replica is stopping and takes no new claim
	// (503, with Retry-After): nothing was recorded for the request, so the
	// same request key may be asked again of another replica.
	CodeDraining = "draining"
	// CodeInternal: anything else went wrong in the runtime (500).
	CodeInternal = "internal"
)

// ErrorBody is the JSON body of every error answer.
type ErrorBody struct {
	// Error is the reason, for people.
	Error string `json:"error"`
	// Code is one of the Code constants (absent from older runtimes).
	Code string `json:"code,omitempty"`
	// ID is the error id of an internal error: the reason says what went
	// wrong without the runtime's internals (host paths, command lines),
	// and the runtime's log holds the detail under this id.
	ID string `json:"id,omitempty"`
}

// APIError is an answer other than success, with the server's reason and
// code.
type APIError struct {
	Status int
	// Code is the answer's machine-readable code (CodeStale, ...); a
	// runtime before codes sends none, and the client then fills in
	// CodeUnauthorized for 401 and "" otherwise.
	Code   string
	Reason string
	// ID is the error id of an internal error (ErrorBody.ID): quote it to
	// whoever reads the runtime's log.
	ID string
	// RetryAfter is the answer's Retry-After in seconds (0: none sent).
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("runtime: %d %s", e.Status, http.StatusText(e.Status))
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if e.ID != "" && !strings.Contains(e.Reason, e.ID) {
		s += " (error id " + e.ID + ")"
	}
	return s
}

// IsCode reports whether err is (or wraps) an *APIError with code.
func IsCode(err error, code string) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == code
}

// ErrStreamCut: a streamed exec's answer ended before its exit frame (the
// connection dropped): whether the command ended, and how, is not known.
var ErrStreamCut = errors.New("runtime: the exec's answer ended before its exit")

// HeaderForwarded marks a request one runtime replica passed on to the
// replica holding its claim (its value is the address of the replica that
// passed it on); a replica never passes such a request on again.
const HeaderForwarded = "Slipway-Forwarded-By"

// retryAfter reads a Retry-After header of whole seconds (0 when absent or
// not seconds).
func retryAfter(h string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}
