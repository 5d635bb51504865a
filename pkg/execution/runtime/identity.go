package runtime

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// ClaimIdentity answers POST /v1/claims/{run}/identity: what the runner of
// the claim's sandbox says about itself, asked when the request came (not
// what was recorded at the claim), with what the runtime holds of the
// claim to check it against.
type ClaimIdentity struct {
	RunID             string `json:"runId"`
	SandboxID         string `json:"sandboxId"`
	Generation        string `json:"generation"`
	AllocationAttempt int    `json:"allocationAttempt"`
	// RunnerPath is the runner binary's path inside the sandbox (its
	// probes run from there).
	RunnerPath string `json:"runnerPath"`
	// Runner is the runner's own answer: its binary's sha256, the
	// generation and sandbox it was started for, its protocols.
	Runner runner.Identity `json:"runner"`
}

// IdentityBody is the body of POST /v1/claims/{run}/identity.
type IdentityBody struct {
	Token string `json:"token"`
}

// Identity asks the runner of claim runID who it is; token must be the
// current attempt's. It relays the answer unchecked: the caller compares
// it with the grant and the run manifest (the pinned runner binary).
func (r *Runtime) Identity(ctx context.Context, runID, token string) (*ClaimIdentity, error) {
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
	return &ClaimIdentity{RunID: runID, SandboxID: s.ID, Generation: g.Generation, AllocationAttempt: g.AllocationAttempt,
		RunnerPath: s.RunnerBinaryPath(), Runner: *id}, nil
}

func (s *Server) identity(w http.ResponseWriter, r *http.Request) {
	var b IdentityBody
	if !decode(w, r, &b) {
		return
	}
	id, err := s.rt.Identity(r.Context(), r.PathValue("run"), b.Token)
	if err != nil {
		writeError(w, claimStatus(err), err)
		return
	}
	writeJSON(w, http.StatusOK, id)
}

// Identity asks the runner of a claim who it is (POST
// /v1/claims/{run}/identity).
func (c *Client) Identity(ctx context.Context, runID, token string) (*ClaimIdentity, error) {
	var id ClaimIdentity
	if err := c.do(ctx, http.MethodPost, "/v1/claims/"+url.PathEscape(runID)+"/identity", IdentityBody{Token: token}, &id); err != nil {
		return nil, err
	}
	return &id, nil
}
