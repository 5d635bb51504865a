package runtimeapi

import (
	"context"
	"net/http"
	"time"
)

// CleanupRecord is one record of a runtime's cleanup reconciler, as GET
// /v1/cleanup serves it: a resource found leaked or expired, what was
// done about it and whether it still needs work.
type CleanupRecord struct {
	ID       int64  `json:"id"`
	Kind     string `json:"kind"`
	Resource string `json:"resource"`
	Pool     string `json:"pool,omitempty"`
	RunID    string `json:"runId,omitempty"`
	// LeaseVersion is the lease as the pass read it ("r-1@2",
	// "warm@<generation>", ...).
	LeaseVersion string    `json:"leaseVersion,omitempty"`
	Action       string    `json:"action"`
	State        string    `json:"state"`
	Outcome      string    `json:"outcome,omitempty"`
	LastError    string    `json:"lastError,omitempty"`
	Owner        string    `json:"owner"`
	Deadline     time.Time `json:"deadline,omitzero"`
	Attempts     int       `json:"attempts"`
	First        time.Time `json:"first"`
	Updated      time.Time `json:"updated"`
}

// Cleanup is GET /v1/cleanup: every record still needing work, and the
// latest closed ones.
type Cleanup struct {
	Remaining []CleanupRecord `json:"remaining"`
	Recent    []CleanupRecord `json:"recent"`
}

// Cleanup reads what cleanup remains on the runtime and what was done
// lately. A runtime that runs no cleanup reconciler answers 404.
func (c *Client) Cleanup(ctx context.Context) (*Cleanup, error) {
	var out Cleanup
	if err := c.do(ctx, http.MethodGet, "/v1/cleanup", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
