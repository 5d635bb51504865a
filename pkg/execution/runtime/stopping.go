package runtime

import (
	"errors"
	"net/http"
)

// A runtime replica that is told to stop drains (Drain): it takes no new
// claim from then on, while what it holds goes on. Its claims' commands keep
// running, their execs, releases and heartbeats are served, until the
// program that composes it (package serve) ends it at its drain deadline.

// ErrDraining: the runtime is stopping and takes no new claim (HTTP 503
// with Retry-After). It is answered before anything is recorded: the
// request key of a refused claim is not used, and another replica grants
// it.
var ErrDraining = errors.New("runtime: draining: this replica is stopping and takes no new claim; ask another replica")

// drainRetryAfter is the Retry-After of a claim refused while draining, in
// seconds: by then the replica's endpoint has left its Service.
const drainRetryAfter = "1"

// Drain makes the runtime refuse new claims and proof claims with
// ErrDraining, and GET /readyz fail, so a Service routes claims to other
// replicas. Claims it holds stay open: their commands, releases and
// heartbeats go on. Drain is repeat-safe and cannot be undone.
func (r *Runtime) Drain() {
	if r.draining.CompareAndSwap(false, true) {
		r.logf("runtime: draining: no new claims; %d open claims go on", r.OpenClaims())
	}
}

// Draining reports whether Drain was called.
func (r *Runtime) Draining() bool { return r.draining.Load() }

// OpenClaims is how many claims the runtime holds open (granted, not yet
// released) that are not suspended (a suspended run has no sandbox: no
// command of it can run), and proof claims under way.
func (r *Runtime) OpenClaims() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.proofs)
	for _, c := range r.claims {
		c.mu.Lock()
		if !c.suspended {
			n++
		}
		c.mu.Unlock()
	}
	return n
}

// refuseDraining answers a claim refused with ErrDraining: 503, Retry-After,
// and the connection closed after the answer, so that the client's next
// request opens a new one, which the Service routes to a replica that is
// not stopping (a kept-alive connection would lead back here).
func (s *Server) refuseDraining(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("Retry-After", drainRetryAfter)
	w.Header().Set("Connection", "close")
	s.writeError(w, r, http.StatusServiceUnavailable, err)
}
