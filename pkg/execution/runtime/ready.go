package runtime

import (
	"context"
	"net/http"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// GET /readyz tells a runtime that cannot take claims (its backend does
// not answer: bubblewrap missing, the cluster's API server away; its
// config repository cannot be read) from one that is merely busy, which
// GET /healthz alone cannot: a readiness probe. 503 names the part at
// fault with a reason and an error id; the detail goes to the runtime's
// log once per distinct error.

// readyTimeout bounds each check, so a backend that hangs reads as not
// ready rather than hanging the probe.
const readyTimeout = 2 * time.Second

// ReadyCheck is one more part GET /readyz checks (WithReadyCheck): Check
// returns "" when the part is ready, else the reason, which the answer
// shows as it is: it must name no secret and no host path.
type ReadyCheck struct {
	Part  string
	Check func(ctx context.Context) (reason string)
}

// WithReadyCheck adds c to what GET /readyz checks (the Kubernetes
// backend's: every verb its Role must grant).
func WithReadyCheck(c ReadyCheck) ServerOption {
	return func(o *serverOptions) { o.checks = append(o.checks, c) }
}

// Ready checks the runtime's backend, its config repository and the parts
// of WithReadyCheck.
func (s *Server) Ready(ctx context.Context) runtimeapi.Readiness {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var out runtimeapi.Readiness
	if s.rt != nil && s.rt.Draining() {
		out.Failing = append(out.Failing, runtimeapi.ReadyPart{Part: "drain",
			Reason: "the runtime is stopping: it takes no new claims while the claims it holds end"})
	}
	if err := s.backend.Health(ctx); err != nil {
		id := s.ready.Tell("backend", err, func(id string) { s.logf("runtime: not ready: error %s: backend: %v", id, err) })
		out.Failing = append(out.Failing, runtimeapi.ReadyPart{Part: "backend",
			Reason: "the sandbox backend does not answer (error id " + id + "; the runtime's log has the detail)"})
	} else {
		s.ready.Clear("backend")
	}
	if s.sync != nil {
		if _, _, err := s.sync.Current(); err != nil {
			out.Failing = append(out.Failing, runtimeapi.ReadyPart{Part: "config repository", Reason: s.syncError(err)})
		}
	}
	for _, c := range s.checks {
		if reason := c.Check(ctx); reason != "" {
			out.Failing = append(out.Failing, runtimeapi.ReadyPart{Part: c.Part, Reason: reason})
		}
	}
	out.Ready = len(out.Failing) == 0
	return out
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	rd := s.Ready(r.Context())
	code := http.StatusOK
	if !rd.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, rd)
}
