package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
)

// ErrNoDesired: the runtime has not read the config repository yet, so it
// does not know the pools' restore windows.
var ErrNoDesired = errors.New("runtime: no desired state yet")

// SweepReport is SweepCheckpoints at the runtime's time, saying for each
// checkpoint deleted (or, with dryRun, that would be), in the store and in
// the checkpoint repository, its run, its pool, when it was taken and when
// its pool's restore window closed on it (`slipway gc --runtime`).
func (r *Runtime) SweepReport(ctx context.Context, dryRun bool) (*runtimeapi.SweepResult, error) {
	if r.o.checkpoints == nil {
		return nil, fmt.Errorf("%w: no checkpoint store or key (WithCheckpoints)", ErrNoCheckpoints)
	}
	// What each checkpoint is, read before the sweep: one it deletes is
	// gone after it.
	all, err := r.o.checkpoints.Store.List()
	if err != nil {
		return nil, err
	}
	of := make(map[string]checkpoint.Predicate, len(all))
	for _, c := range all {
		of[c.Digest] = c.Predicate
	}
	now := r.now()
	got, windows, err := r.sweepCheckpoints(ctx, now, dryRun)
	if err != nil {
		return nil, err
	}
	res := &runtimeapi.SweepResult{DryRun: dryRun, At: now.UTC(), Deleted: []runtimeapi.SweptCheckpoint{},
		Kept: got.Kept, Blobs: got.Blobs, Bytes: got.Bytes}
	for _, d := range got.Deleted {
		p := of[d]
		res.Deleted = append(res.Deleted, runtimeapi.SweptCheckpoint{Checkpoint: d, RunID: p.RunID, Pool: p.Pool,
			Created: p.Created, WindowClosed: p.Created.Add(windows[p.Pool])})
	}
	if pub := got.Published; pub != nil {
		res.Repository, res.PublishedKept, res.Published = pub.Repository, pub.Kept, []runtimeapi.SweptCheckpoint{}
		for _, u := range pub.Deleted {
			p := u.Predicate
			res.Published = append(res.Published, runtimeapi.SweptCheckpoint{Checkpoint: u.Ref, RunID: p.RunID, Pool: p.Pool,
				Created: p.Created, WindowClosed: p.Created.Add(windows[p.Pool]), Signature: u.Signature, Attestation: u.Attestation})
		}
		for _, u := range pub.Unjudged {
			res.Unjudged = append(res.Unjudged, runtimeapi.Unjudged{Checkpoint: u.Ref, Why: u.Why})
		}
	}
	return res, nil
}

// sweepRoutes serves the sweep of checkpoints past their restore window.
func (s *Server) sweepRoutes() {
	s.mux.Handle("POST /v1/checkpoints/sweep", s.auth(func(w http.ResponseWriter, r *http.Request) {
		var b runtimeapi.SweepBody
		if !s.decode(w, r, &b) {
			return
		}
		res, err := s.rt.SweepReport(r.Context(), b.DryRun)
		switch {
		case errors.Is(err, ErrNoDesired):
			s.writeError(w, r, http.StatusServiceUnavailable, err)
		case err != nil:
			s.writeError(w, r, checkpointStatus(err), err)
		default:
			writeJSON(w, http.StatusOK, res)
		}
	}))
}
