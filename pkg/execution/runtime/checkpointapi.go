package runtime

import (
	"errors"
	"net/http"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
)

// checkpointRoutes serves checkpoints, suspend, resume and question 6.
func (s *Server) checkpointRoutes() {
	s.mux.Handle("POST /v1/claims/{run}/checkpoint", s.auth(s.checkpointOrSuspend(false)))
	s.mux.Handle("POST /v1/claims/{run}/suspend", s.auth(s.checkpointOrSuspend(true)))
	s.mux.Handle("POST /v1/claims/{run}/resume", s.auth(s.resume))
	s.mux.Handle("GET /v1/runs/{run}/durable", s.auth(s.durable))
	// The operator's path: the runtime's token, no claim token (operator.go).
	s.mux.Handle("POST /v1/runs/{run}/suspend", s.auth(s.operatorSuspend))
	s.mux.Handle("POST /v1/runs/{run}/resume", s.auth(s.operatorResume))
}

// checkpointStatus is the HTTP status of a checkpoint error.
func checkpointStatus(err error) int {
	switch {
	case errors.Is(err, ErrNoCheckpoints):
		return http.StatusNotImplemented
	case errors.Is(err, ErrSuspended), errors.Is(err, ErrNotSuspended), errors.Is(err, checkpoint.ErrRefused):
		return http.StatusConflict
	case errors.Is(err, runs.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrActionInput):
		return http.StatusBadRequest
	}
	return claimStatus(err)
}

func (s *Server) checkpointOrSuspend(suspend bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var b runtimeapi.CheckpointBody
		if !s.decode(w, r, &b) {
			return
		}
		req := CheckpointRequest{Token: b.Token, EventSeq: b.EventSeq}
		var (
			cp  *checkpoint.Checkpoint
			err error
		)
		if suspend {
			cp, err = s.rt.Suspend(r.Context(), r.PathValue("run"), req)
		} else {
			cp, err = s.rt.Checkpoint(r.Context(), r.PathValue("run"), req)
		}
		if err != nil {
			s.writeError(w, r, checkpointStatus(err), err)
			return
		}
		writeJSON(w, http.StatusOK, checkpointResult(cp, suspend))
	}
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	var b runtimeapi.ResumeBody
	if !s.decode(w, r, &b) {
		return
	}
	if _, err := restoreBy(b.By); err != nil {
		s.writeError(w, r, http.StatusBadRequest, err)
		return
	}
	g, err := s.rt.ResumeAs(r.Context(), r.PathValue("run"), b.Token, b.By)
	if err != nil {
		s.writeError(w, r, checkpointStatus(err), err)
		return
	}
	writeJSON(w, http.StatusOK, g)
}

func (s *Server) operatorSuspend(w http.ResponseWriter, r *http.Request) {
	var b runtimeapi.OperatorAction
	if !s.decode(w, r, &b) {
		return
	}
	cp, err := s.rt.SuspendRun(r.Context(), r.PathValue("run"), b)
	if err != nil {
		s.writeError(w, r, checkpointStatus(err), err)
		return
	}
	writeJSON(w, http.StatusOK, checkpointResult(cp, true))
}

func (s *Server) operatorResume(w http.ResponseWriter, r *http.Request) {
	var b runtimeapi.OperatorAction
	if !s.decode(w, r, &b) {
		return
	}
	res, err := s.rt.ResumeRun(r.Context(), r.PathValue("run"), b)
	if err != nil {
		s.writeError(w, r, checkpointStatus(err), err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) durable(w http.ResponseWriter, r *http.Request) {
	d, err := s.rt.Durable(r.Context(), r.PathValue("run"))
	if err != nil {
		s.writeError(w, r, checkpointStatus(err), err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}
