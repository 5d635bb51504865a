package runtimeapi

import (
	"context"
	"net/http"
	"time"
)

// SweepBody asks a runtime to delete the checkpoints whose pool's restore
// window has closed (POST /v1/checkpoints/sweep).
type SweepBody struct {
	// DryRun lists what would be deleted and deletes nothing.
	DryRun bool `json:"dryRun,omitempty"`
}

// SweptCheckpoint is one checkpoint a sweep deleted, or would.
type SweptCheckpoint struct {
	// Checkpoint is its digest; in SweepResult.Published, its reference
	// in the repository, by digest.
	Checkpoint string    `json:"checkpoint"`
	RunID      string    `json:"runId"`
	Pool       string    `json:"pool"`
	Created    time.Time `json:"created"`
	// WindowClosed is when its pool's restore window closed on it.
	WindowClosed time.Time `json:"windowClosed"`
	// Signature and Attestation are the manifests of its .sig and .att
	// tags the registry deleted with it, by digest (Published only; ""
	// in a dry run or when it had none).
	Signature   string `json:"signature,omitempty"`
	Attestation string `json:"attestation,omitempty"`
}

// Unjudged is a checkpoint a sweep found in the checkpoint repository and
// left alone, with why (its signature or attestation does not verify with
// the runtime's key: another runtime's, or damaged).
type Unjudged struct {
	Checkpoint string `json:"checkpoint"`
	Why        string `json:"why"`
}

// SweepResult is what a sweep of a runtime's checkpoints found and did.
type SweepResult struct {
	DryRun bool `json:"dryRun,omitempty"`
	// At is the runtime's time the windows were judged at.
	At time.Time `json:"at"`
	// Deleted lists the checkpoints past their pool's restore window, no
	// run's head, deleted (with DryRun: that would be).
	Deleted []SweptCheckpoint `json:"deleted"`
	// Kept counts the checkpoints left: inside their pool's restore
	// window, the head of a run still open (suspended or not), or of a
	// pool the runtime does not know.
	Kept int `json:"kept"`
	// Blobs and Bytes are the blobs no remaining checkpoint uses, removed
	// (or that would be).
	Blobs int   `json:"blobs"`
	Bytes int64 `json:"bytes"`

	// Repository is the registry repository the runtime publishes its
	// checkpoints to ("" without one). The sweep judged the checkpoints
	// there the same way and deleted them first, each with its signature
	// and attestation: Published lists them (with DryRun: would),
	// PublishedKept counts those left, Unjudged those not verified as the
	// runtime's. The registry removes their layers by its own garbage
	// collection.
	Repository    string            `json:"repository,omitempty"`
	Published     []SweptCheckpoint `json:"published,omitempty"`
	PublishedKept int               `json:"publishedKept,omitempty"`
	Unjudged      []Unjudged        `json:"unjudged,omitempty"`
}

// SweepCheckpoints deletes (with b.DryRun, lists) the runtime's
// checkpoints whose pool's restore window has closed.
func (c *Client) SweepCheckpoints(ctx context.Context, b SweepBody) (*SweepResult, error) {
	var out SweepResult
	if err := c.do(ctx, http.MethodPost, "/v1/checkpoints/sweep", b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
