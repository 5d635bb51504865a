package runtime

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/generation"
)

// The runtime's control-plane protocol: the version of what it
// understands of generations. A generation's compatibility names the
// control-plane protocol versions that understand it.
const (
	ControlPlaneProtocol    = 1
	MinControlPlaneProtocol = 1
)

// Info is GET /v1/info: what this runtime speaks and how current its view
// of the config repository is. A rollout checks a generation's
// compatibility against it (step 1) and waits for ObservedRevision to
// reach each step's commit.
type Info struct {
	ControlPlaneProtocol generation.Range `json:"controlPlaneProtocol"`
	RunnerProtocol       generation.Range `json:"runnerProtocol"`
	// ObservedRevision is the config repository commit the runtime serves
	// from, ObservedAt when it last confirmed it current.
	ObservedRevision string    `json:"observedRevision,omitempty"`
	ObservedAt       time.Time `json:"observedAt,omitzero"`
	LastSyncError    string    `json:"lastSyncError,omitempty"`
	// Limits and Network say how sandboxes are confined here.
	Limits  LimitsInfo `json:"limits"`
	Network string     `json:"network"`
}

// LimitsInfo says which of pool.yaml's limits (spec.limits) this runtime's
// backend enforces, and how. A pool setting one not in Enforced is refused
// unless its spec.acceptUnenforced names it.
type LimitsInfo struct {
	// Cgroup is the cgroup tree sandboxes are put in: "v2", "v1" or "none".
	Cgroup string `json:"cgroup"`
	// Enforced lists the limit names (cpu, memory, pids, openFiles,
	// workspace) enforced here; How says with what.
	Enforced []string          `json:"enforced"`
	How      map[string]string `json:"how,omitempty"`
	// Unavailable says why a limit is not enforced, where one is not.
	Unavailable string `json:"unavailable,omitempty"`
	// Description says in words how commands are bounded.
	Description string `json:"description"`
}

// PoolStatus is GET /v1/pools/{pool}: per generation, what the runtime
// runs. Generations the desired state no longer names but that still have
// sandboxes are listed too (State "").
type PoolStatus struct {
	Pool             string             `json:"pool"`
	ObservedRevision string             `json:"observedRevision"`
	Generations      []GenerationStatus `json:"generations"`
}

// Generation returns the status of generation id (zero counts if the
// runtime runs nothing of it).
func (p *PoolStatus) Generation(id string) GenerationStatus {
	for _, g := range p.Generations {
		if g.ID == id {
			return g
		}
	}
	return GenerationStatus{ID: id}
}

// ProofRequest is POST /v1/pools/{pool}/proofs: run proof checks on a
// proof claim of a warming (or active) generation for a rollout. Proof
// claims never count as traffic.
type ProofRequest struct {
	Generation string   `json:"generation"`
	Rollout    string   `json:"rollout"`
	Checks     []string `json:"checks"`
}

// ProofResult is the answer: one piece of evidence per check, in order.
type ProofResult struct {
	Pool       string     `json:"pool"`
	Generation string     `json:"generation"`
	Rollout    string     `json:"rollout"`
	RunID      string     `json:"runId,omitempty"`
	SandboxID  string     `json:"sandboxId,omitempty"`
	Evidence   []Evidence `json:"evidence"`
}

// Passed reports whether every check passed.
func (r *ProofResult) Passed() bool {
	for _, e := range r.Evidence {
		if !e.Passed {
			return false
		}
	}
	return len(r.Evidence) > 0
}

// Evidence records what proved (or disproved) one check: its name, result
// and reason, when, on which generation and sandbox, and who ran it.
type Evidence struct {
	Check      string    `json:"check"`
	Passed     bool      `json:"passed"`
	Reason     string    `json:"reason"`
	Generation string    `json:"generation"`
	SandboxID  string    `json:"sandboxId,omitempty"`
	Started    time.Time `json:"started"`
	Finished   time.Time `json:"finished"`
	By         string    `json:"by"`
}

// StopResult is POST /v1/pools/{pool}/generations/{generation}/stop: the
// claims of the generation that were still open and are now ended.
type StopResult struct {
	Stopped []string `json:"stopped"`
}

// Info returns GET /v1/info.
func (c *Client) Info(ctx context.Context) (*Info, error) {
	var out Info
	if err := c.do(ctx, http.MethodGet, "/v1/info", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Sync asks the runtime to read the config repository now and returns the
// revision it serves from.
func (c *Client) Sync(ctx context.Context) (string, error) {
	var out struct {
		ObservedRevision string `json:"observedRevision"`
	}
	if err := c.do(ctx, http.MethodPost, "/v1/sync", nil, &out); err != nil {
		return "", err
	}
	return out.ObservedRevision, nil
}

// PoolStatus returns GET /v1/pools/{pool}.
func (c *Client) PoolStatus(ctx context.Context, pool string) (*PoolStatus, error) {
	var out PoolStatus
	if err := c.do(ctx, http.MethodGet, "/v1/pools/"+url.PathEscape(pool), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Prove runs proof checks on a proof claim of req.Generation.
func (c *Client) Prove(ctx context.Context, pool string, req ProofRequest) (*ProofResult, error) {
	var out ProofResult
	if err := c.do(ctx, http.MethodPost, "/v1/pools/"+url.PathEscape(pool)+"/proofs", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Stop ends the open claims of a generation of pool.
func (c *Client) Stop(ctx context.Context, pool, gen string) (*StopResult, error) {
	var out StopResult
	if err := c.do(ctx, http.MethodPost, "/v1/pools/"+url.PathEscape(pool)+"/generations/"+url.PathEscape(gen)+"/stop", struct{}{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
