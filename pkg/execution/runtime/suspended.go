package runtime

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/internal/atomicfile"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
)

// SuspendedDir is where, in the checkpoint store's directory, the runtime
// keeps one record per suspended run: what a restarted runtime needs to
// hold the run open and resume it.
const SuspendedDir = "slipway-suspended"

// suspension is a suspended run as the runtime keeps it on disk. It holds
// the owner's token only as its SHA-256: the file never holds a secret.
type suspension struct {
	RunID      string `json:"runId"`
	Pool       string `json:"pool"`
	Tenant     string `json:"tenant,omitempty"`
	SessionID  string `json:"sessionId,omitempty"`
	RequestKey string `json:"requestKey,omitempty"`
	// Generation is the generation the run was suspended on, as it was
	// verified then (a restart may find it retired from the desired
	// state; Resume needs its pool and runner protocol).
	Generation *generation.Generation `json:"generation"`
	// Checkpoint is the run's head: the checkpoint Resume restores.
	Checkpoint  string    `json:"checkpoint"`
	Attempt     int       `json:"attempt"`
	TokenSHA256 string    `json:"tokenSha256"`
	Suspended   time.Time `json:"suspended"`
}

// tokenSum is the hex SHA-256 of a fencing token.
func tokenSum(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

// sameToken says whether token hashes to sum, in constant time.
func sameToken(sum, token string) bool {
	return subtle.ConstantTimeCompare([]byte(sum), []byte(tokenSum(token))) == 1
}

// suspendedDir is the directory of the suspension records ("" when the
// runtime keeps no checkpoints).
func (r *Runtime) suspendedDir() string {
	if r.o.checkpoints == nil {
		return ""
	}
	return filepath.Join(r.o.checkpoints.Store.Dir(), SuspendedDir)
}

// safeRunID refuses a run id that cannot be a file name of its own.
func safeRunID(id string) error {
	if id == "" || strings.ContainsAny(id, `/\`) || id == "." || id == ".." || strings.HasPrefix(id, ".") {
		return fmt.Errorf("runtime: run id %q cannot name a suspension record", id)
	}
	return nil
}

// holdSuspended records that c is suspended at checkpoint digest, before
// its sandbox is deleted: a runtime that stops (or is killed) from here on
// finds the run suspended when it starts again. c.mu must not be held.
func (r *Runtime) holdSuspended(c *claim, digest string) error {
	dir := r.suspendedDir()
	if err := safeRunID(c.runID); err != nil {
		return err
	}
	c.mu.Lock()
	rec := suspension{RunID: c.runID, Pool: c.pool, Tenant: c.tenant, SessionID: c.sessionID, RequestKey: c.requestKey,
		Generation: c.gen, Checkpoint: digest, Attempt: c.attempt, TokenSHA256: c.tokenSHA256(), Suspended: r.now().UTC()}
	c.mu.Unlock()
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("runtime: record suspended run %s: %w", c.runID, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("runtime: record suspended run %s: %w", c.runID, err)
	}
	if err := atomicfile.Write(filepath.Join(dir, c.runID+".json"), raw, 0o600); err != nil {
		return fmt.Errorf("runtime: record suspended run %s: %w", c.runID, err)
	}
	return nil
}

// dropSuspended forgets runID's suspension record (it resumed or ended);
// a missing record is no error.
func (r *Runtime) dropSuspended(runID string) error {
	dir := r.suspendedDir()
	if dir == "" || safeRunID(runID) != nil {
		return nil
	}
	if err := os.Remove(filepath.Join(dir, runID+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("runtime: forget suspended run %s: %w", runID, err)
	}
	return nil
}

// readSuspended reads the suspension records, sorted by run id; a record
// that cannot be read is an error naming its file.
func (r *Runtime) readSuspended() ([]suspension, error) {
	dir := r.suspendedDir()
	if dir == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runtime: suspended runs: %w", err)
	}
	var out []suspension
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("runtime: suspended runs: %w", err)
		}
		var s suspension
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("runtime: suspended run record %s: %w", e.Name(), err)
		}
		if s.RunID+".json" != e.Name() || s.Generation == nil || s.Checkpoint == "" || s.TokenSHA256 == "" {
			return nil, fmt.Errorf("runtime: suspended run record %s: want its run id, generation, checkpoint and token hash", e.Name())
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b suspension) int { return strings.Compare(a.RunID, b.RunID) })
	return out, nil
}

// AdoptSuspended holds open again, suspended, the runs an earlier runtime
// on the same state suspended: each keeps its owner (the token it was
// suspended with resumes or releases it), its allocation attempt and its
// checkpoint head. A record whose run has ended meanwhile is dropped. Call
// it once, before serving, and before open runs without sandboxes are
// finalised (Suspended says which runs to spare). It returns the run ids
// it adopted, sorted.
func (r *Runtime) AdoptSuspended(ctx context.Context) ([]string, error) {
	recs, err := r.readSuspended()
	if err != nil {
		return nil, err
	}
	d, _ := r.desired()
	var adopted []string
	var errs []error
	for _, s := range recs {
		m, err := r.store.Get(ctx, s.RunID)
		switch {
		case errors.Is(err, runs.ErrNotFound):
			errs = append(errs, fmt.Errorf("runtime: suspended run %s: no run manifest", s.RunID))
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		case m.Status.Final():
			errs = append(errs, r.dropSuspended(s.RunID))
			continue
		case m.WorkspaceCheckpointID != s.Checkpoint:
			errs = append(errs, fmt.Errorf("runtime: suspended run %s: its record names checkpoint %s, its manifest %s", s.RunID, s.Checkpoint, m.WorkspaceCheckpointID))
			continue
		}
		g := s.Generation
		if d != nil && d.Pools[s.Pool] != nil {
			if cur, ok := d.Pools[s.Pool].Generations[g.ID]; ok {
				g = cur // as verified now
			}
		}
		c := &claim{
			runID: s.RunID, pool: s.Pool, tenant: s.Tenant, sessionID: s.SessionID, requestKey: s.RequestKey, gen: g, secretVersion: secretVersion(g),
			attempt: s.Attempt, tokenSum: s.TokenSHA256, suspended: true, checkpointID: s.Checkpoint,
			fence: make(chan struct{}), done: make(chan struct{}), granted: r.now(),
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return adopted, ErrClosed
		}
		if r.claims[s.RunID] != nil {
			r.mu.Unlock()
			continue
		}
		r.claims[s.RunID] = c
		r.wg.Add(1)
		go r.heartbeat(c)
		r.mu.Unlock()
		adopted = append(adopted, s.RunID)
		r.logf("runtime: run %s held again, suspended at checkpoint %s (allocation attempt %d)", s.RunID, s.Checkpoint, s.Attempt)
	}
	return adopted, errors.Join(errs...)
}

// Suspended reports whether runID is a run this Runtime holds suspended:
// it has no sandbox by design, and is not to be finalised for want of one.
func (r *Runtime) Suspended(runID string) bool {
	c, err := r.lookup(runID)
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.suspended && !c.released
}
