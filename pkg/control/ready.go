package control

import (
	"context"
	"net/http"
	"time"

	"github.com/slipway-dev/slipway/internal/startup"
	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// Readiness tells a process that cannot do its work (its database does
// not answer, its config repository cannot be read) from one that is
// merely busy: GET /healthz says the process serves HTTP at all (a
// liveness probe), GET /readyz says whether it can take work (a readiness
// probe; 503 names the part at fault). A failing part is told as a reason
// and an error id; its detail (the host, the repository's URL, the
// driver's words) goes to the log once per distinct error, under that id.

// readyTimeout bounds each check, so a database that hangs reads as not
// ready rather than hanging the probe.
const readyTimeout = 2 * time.Second

// errSource is a ConfigSource that tells its last refresh's error.
type errSource interface{ Err() error }

// Ready checks the plane's database and config repository.
func (p *Plane) Ready(ctx context.Context) controlapi.Readiness {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var out controlapi.Readiness
	if err := p.st.Ping(ctx); err != nil {
		out.Failing = append(out.Failing, controlapi.ReadyPart{Part: "database", Reason: p.tell("database", "does not answer", err)})
	} else {
		p.ready.Clear("database")
	}
	if es, ok := p.c.Config.(errSource); ok {
		if err := es.Err(); err != nil {
			out.Failing = append(out.Failing, controlapi.ReadyPart{Part: "config repository", Reason: p.tell("config repository", configWhat, err)})
		} else {
			p.ready.Clear("config repository")
		}
	}
	out.Ready = len(out.Failing) == 0
	return out
}

// configWhat is what a failing config repository is, for readiness.
const configWhat = "cannot be read (serving the last good configuration)"

// tell logs err once per distinct error of part and returns the reason
// an answer may carry.
func (p *Plane) tell(part, what string, err error) string {
	id := p.ready.Tell(part, err, func(id string) {
		p.c.Logger.Error("not ready: "+part+" "+what, "error_id", id, "err", startup.OneLine(err))
	})
	return part + " " + what + " (error id " + id + "; the control plane's log has the detail)"
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	rd := s.p.Ready(r.Context())
	code := http.StatusOK
	if !rd.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, rd)
}
