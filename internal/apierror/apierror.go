package apierror

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
)

// Error is an error with a reason the client may read; Err, if any, is
// the detail only the server's log shows.
type Error struct {
	Reason string
	Err    error
}

// Public is an *Error with reason and the detail err.
func Public(reason string, err error) *Error { return &Error{Reason: reason, Err: err} }

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Answer is what an error answer tells the client.
type Answer struct {
	// Reason is the client's text: the error as it is when it was told
	// whole, else a public reason and the error id.
	Reason string
	// ID is the error id when the detail stayed in the log ("" when the
	// error was told whole).
	ID string
}

// Hidden reports whether the answer kept a detail back for the log.
func (a Answer) Hidden() bool { return a.ID != "" }

// Decide is the answer for err: told whole when tellable (a refusal the
// client can fix, as its caller decides: a validation error naming the
// field, pool or limit at fault); else the reason of the first *Error in
// err's chain, or "internal error", with a new error id. An *Error with
// no detail, unwrapped, is told whole too.
func Decide(err error, tellable bool) Answer {
	var e *Error
	if tellable || (errors.As(err, &e) && e.Err == nil && err == error(e)) {
		return Answer{Reason: err.Error()} // nothing kept back
	}
	reason := "internal error"
	if e != nil && e.Reason != "" {
		reason = e.Reason
	}
	id := NewID()
	return Answer{Reason: fmt.Sprintf("%s (error id %s)", reason, id), ID: id}
}

// NewID is a fresh error id: "e-" and 12 random hex digits.
func NewID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return "e-" + hex.EncodeToString(b[:])
}
