package registrytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Rule says which requests a FaultProxy answers with a fault instead of
// forwarding them. Rules are checked in the order they were injected; the
// first that matches serves its fault.
type Rule struct {
	// Method is the HTTP method to match, "" for any.
	Method string
	// PathContains is a substring of the URL path to match, "" for any.
	PathContains string
	// Times is how many matching requests get the fault; once exhausted the
	// rule no longer matches. 0 means every matching request.
	Times int
	// Fault is what matching requests get. The zero Fault forwards them
	// unchanged, which lets a rule wave the first Times requests through
	// before the rules after it apply.
	Fault Fault
}

func (r Rule) matches(req *http.Request) bool {
	return (r.Method == "" || strings.EqualFold(r.Method, req.Method)) &&
		strings.Contains(req.URL.Path, r.PathContains)
}

type faultKind int

const (
	faultNone faultKind = iota
	faultStatus
	faultReset
	faultHang
)

// Fault is what a FaultProxy does to a request instead of forwarding it.
// Make one with TooManyRequests, Status, Reset or Hang.
type Fault struct {
	kind       faultKind
	code       int
	retryAfter string
	hang       time.Duration
}

// TooManyRequests answers 429 with a registry-style TOOMANYREQUESTS error
// body and, unless retryAfter is empty, a Retry-After header with that value
// (delay seconds such as "1", or an HTTP date; it is sent as it is).
func TooManyRequests(retryAfter string) Fault {
	return Fault{kind: faultStatus, code: http.StatusTooManyRequests, retryAfter: retryAfter}
}

// Status answers with code and a small registry-style JSON errors body, as
// distribution does for 500, 502, 503 and friends.
func Status(code int) Fault {
	return Fault{kind: faultStatus, code: code}
}

// Reset closes the client's connection with a TCP RST (SO_LINGER 0) before
// any response byte, so the client reads ECONNRESET.
//
// Go's http.Transport silently retries an idempotent request (GET, HEAD, or
// any request with an Idempotency-Key header) that fails on a reused
// keep-alive connection before any response byte. To make such a client see
// the error, reset every matching request (Times 0) or have it use a fresh
// connection.
func Reset() Fault {
	return Fault{kind: faultReset}
}

// Hang holds the request without answering for d, or until the client gives
// up or the proxy closes, and then resets the connection as Reset does.
func Hang(d time.Duration) Fault {
	return Fault{kind: faultHang, hang: d}
}

// String describes the fault, as in "status 503" or "hang 2s".
func (f Fault) String() string {
	switch f.kind {
	case faultStatus:
		if f.retryAfter != "" {
			return fmt.Sprintf("status %d (retry-after %s)", f.code, f.retryAfter)
		}
		return fmt.Sprintf("status %d", f.code)
	case faultReset:
		return "reset"
	case faultHang:
		return "hang " + f.hang.String()
	default:
		return "none"
	}
}

// serve applies the fault to the request. It calls record with the status it
// sends, 0 for a reset, before the client can see it. done ends a hang early.
func (f Fault) serve(w http.ResponseWriter, r *http.Request, done <-chan struct{}, record func(status int)) {
	switch f.kind {
	case faultStatus:
		// Read some of the body, as a registry would, so a small upload does
		// not turn the answer into a broken pipe on the client's side.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		record(f.code)
		w.WriteHeader(f.code)
		_ = json.NewEncoder(w).Encode(errorsBody(f.code))
	case faultHang:
		t := time.NewTimer(f.hang)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
		case <-done:
		}
		resetConn(w, record)
	default:
		resetConn(w, record)
	}
}

// resetConn takes the connection from the server and closes it with SO_LINGER
// 0, which makes the kernel send RST instead of FIN. It calls record(0) first.
func resetConn(w http.ResponseWriter, record func(status int)) {
	record(0)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable: the best left is to abort the response.
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// registryError is one entry of the distribution API's error body.
type registryError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func errorsBody(code int) map[string][]registryError {
	name := "UNKNOWN"
	switch code {
	case http.StatusTooManyRequests:
		name = "TOOMANYREQUESTS"
	case http.StatusUnauthorized:
		name = "UNAUTHORIZED"
	case http.StatusForbidden:
		name = "DENIED"
	case http.StatusServiceUnavailable:
		name = "UNAVAILABLE"
	}
	msg := "injected fault: " + strings.ToLower(http.StatusText(code))
	return map[string][]registryError{"errors": {{Code: name, Message: msg}}}
}
