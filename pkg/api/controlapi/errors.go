package controlapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ErrorBody is every error's body.
type ErrorBody struct {
	// Code is the error's class, stable and machine-readable: one of the
	// Code constants. Error and Reason are for people and may change.
	Code  string `json:"code,omitempty"`
	Error string `json:"error"`
	// Reason is a bounded word for a refusal (a 429's bound: queue_full,
	// tenant_queue_full, budget...).
	Reason string `json:"reason,omitempty"`
	// RetryAfterSeconds repeats the Retry-After header of a 429.
	RetryAfterSeconds int `json:"retryAfterSeconds,omitempty"`
	// ID is the error id of an internal error or an outage: Error says
	// what went wrong without the plane's internals (addresses, paths),
	// and the control plane's log holds the detail under this id.
	ID string `json:"id,omitempty"`
}

// The error codes.
const (
	CodeBadRequest      = "bad_request"     // 400: the request is malformed or contradicts itself
	CodeUnauthenticated = "unauthenticated" // 401: no token, or one unknown or revoked
	CodeForbidden       = "forbidden"       // 403: the token's scope does not allow it
	CodeNotFound        = "not_found"       // 404: no such job (or not the tenant's)
	CodeConflict        = "conflict"        // 409: the request conflicts with the job's state
	CodeTooLarge        = "too_large"       // 413: a body over the bound
	CodeLimitExceeded   = "limit_exceeded"  // 429: a queue bound or budget; Reason says which
	CodeUnavailable     = "unavailable"     // 503: the database or a dependency; retry
	CodeInternal        = "internal"        // 500: anything else
)

// CodeFor is the code of an error answered with HTTP status status.
func CodeFor(status int) string {
	switch status {
	case http.StatusBadRequest:
		return CodeBadRequest
	case http.StatusUnauthorized:
		return CodeUnauthenticated
	case http.StatusForbidden:
		return CodeForbidden
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusConflict:
		return CodeConflict
	case http.StatusRequestEntityTooLarge:
		return CodeTooLarge
	case http.StatusTooManyRequests:
		return CodeLimitExceeded
	case http.StatusServiceUnavailable:
		return CodeUnavailable
	}
	return CodeInternal
}

// APIError is an answer other than success.
type APIError struct {
	Status     int
	Body       ErrorBody
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("control plane: %d %s: %s", e.Status, http.StatusText(e.Status), e.Body.Error)
	if e.Body.Reason != "" {
		msg += " (" + e.Body.Reason + ")"
	}
	if e.Body.ID != "" && !strings.Contains(e.Body.Error, e.Body.ID) {
		msg += " (error id " + e.Body.ID + ")"
	}
	return msg
}

// Code is the error's code: the body's, or the status's when the body
// had none (an older server, a proxy).
func (e *APIError) Code() string {
	if e.Body.Code != "" {
		return e.Body.Code
	}
	return CodeFor(e.Status)
}

// HasCode says err is (or wraps) an APIError with code.
func HasCode(err error, code string) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code() == code
}
