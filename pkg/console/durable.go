package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// NoCheckpoints is what a run page says of a runtime that keeps no
// checkpoints (its durable answer is 501 checkpoints_unavailable): no
// suspend or resume is offered.
const NoCheckpoints = "this runtime keeps no checkpoints"

// durableView is a run page's Durable section: question 6 as the
// runtime answers it (GET /v1/runs/{run}/durable), and which action the
// run takes now.
type durableView struct {
	D *runtimeapi.Durable
	// None says why there is no answer ("" when there is one).
	None string
	// Suspend and Resume say which action an operator may take now.
	Suspend, Resume bool
}

// durableOf reads question 6 for run m from rc, the runtime that served
// its manifest.
func (s *Server) durableOf(ctx context.Context, rc *runtimeapi.Client, m *runmanifest.Manifest) durableView {
	d, err := rc.Durable(ctx, m.RunID)
	var ae *runtimeapi.APIError
	switch {
	case errors.As(err, &ae) && ae.Code == runtimeapi.CodeNoCheckpoints:
		return durableView{None: NoCheckpoints}
	case err != nil:
		id := errorID()
		s.log.Warn("console: durable", "run", m.RunID, "id", id, "err", err)
		return durableView{None: "the runtime did not answer (error " + id + ")"}
	}
	open := !m.Status.Final()
	return durableView{D: d, Suspend: open && !d.Suspended, Resume: open && d.Suspended}
}

// suspendRun and resumeRun are the operator's actions on a run: each
// needs a reason, and the runtime records it with the operator (its
// tenant and token id, never the token) as the actor, with the suspend
// or the restore; the run page reads both back from the runtime.
func (s *Server) suspendRun(w http.ResponseWriter, r *http.Request, ss *session) {
	s.runAction(w, r, ss, "suspend", func(ctx context.Context, c *runtimeapi.Client, id string, a runtimeapi.OperatorAction) error {
		_, err := c.SuspendRun(ctx, id, a)
		return err
	})
}

func (s *Server) resumeRun(w http.ResponseWriter, r *http.Request, ss *session) {
	s.runAction(w, r, ss, "resume", func(ctx context.Context, c *runtimeapi.Client, id string, a runtimeapi.OperatorAction) error {
		_, err := c.ResumeRun(ctx, id, a)
		return err
	})
}

// runAction asks each runtime of the console in turn to act on the run,
// until one holds it (the others answer no_claim, not_found, or that
// they keep no checkpoints).
func (s *Server) runAction(w http.ResponseWriter, r *http.Request, ss *session, verb string,
	act func(ctx context.Context, c *runtimeapi.Client, id string, a runtimeapi.OperatorAction) error) {
	id := r.PathValue("id")
	what := verb + " run " + id
	reason, ok := s.reasonOf(w, r, ss, what)
	if !ok {
		return
	}
	// One line: a textarea's line breaks become spaces.
	a := runtimeapi.OperatorAction{Reason: strings.Join(strings.Fields(reason), " "), Actor: actor(ss)}
	var first error
	for _, rt := range s.runtimes {
		err := act(r.Context(), rt.Client, id, a)
		if err == nil {
			http.Redirect(w, r, "/runs/"+url.PathEscape(id)+"#durable", http.StatusSeeOther)
			return
		}
		var ae *runtimeapi.APIError
		if errors.As(err, &ae) && ae.Code == runtimeapi.CodeNoCheckpoints && len(s.runtimes) == 1 {
			s.fail(w, r, ss, http.StatusConflict, what+": "+NoCheckpoints+"; nothing was done", nil)
			return
		}
		if !errors.As(err, &ae) || ae.Code != runtimeapi.CodeNoClaim && ae.Code != runtimeapi.CodeNotFound && ae.Code != runtimeapi.CodeNoCheckpoints {
			s.fail(w, r, ss, http.StatusBadGateway, what, err)
			return
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = errors.New("no runtime is configured (--runtime)")
	}
	s.fail(w, r, ss, http.StatusBadGateway, what, first)
}
