package runtime

import (
	"context"
	"fmt"
	"net/http"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// Identity asks the runner of claim runID who it is; token must be the
// current attempt's. It relays the answer unchecked: the caller compares
// it with the grant and the run manifest (the pinned runner binary).
func (r *Runtime) Identity(ctx context.Context, runID, token string) (*runtimeapi.ClaimIdentity, error) {
	c, err := r.lookup(runID)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if err := c.check(token); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	s, g := c.sandbox, c.grant()
	c.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("%w: run %s has no sandbox", sandbox.ErrNotRunning, runID)
	}
	id, err := s.Identity(ctx)
	if err != nil {
		return nil, fmt.Errorf("runtime: run %s: the runner of sandbox %s did not answer: %w", runID, s.ID, err)
	}
	return &runtimeapi.ClaimIdentity{RunID: runID, SandboxID: s.ID, Generation: g.Generation, AllocationAttempt: g.AllocationAttempt,
		RunnerPath: s.RunnerBinaryPath(), Runner: runtimeapi.RunnerIdentity(*id)}, nil
}

func (s *Server) identity(w http.ResponseWriter, r *http.Request) {
	var b runtimeapi.IdentityBody
	if !s.decode(w, r, &b) {
		return
	}
	id, err := s.rt.Identity(r.Context(), r.PathValue("run"), b.Token)
	if err != nil {
		s.writeError(w, r, claimStatus(err), err)
		return
	}
	writeJSON(w, http.StatusOK, id)
}
