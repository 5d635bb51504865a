package runtime

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
)

// CheckpointGeneration moves every claim of generation gen in pool that is
// open with a sandbox (a rollout's drain deadline with onDrainDeadline:
// checkpoint) through a checkpoint onto the pool's active generation: each
// is suspended (checkpointed, its sandbox deleted, Suspend) and resumed
// (Resume: a sandbox of the active generation with a fresh refresh phase,
// the checkpoint verified before it is restored). The owner's token is
// fenced as after a move; the owner adopts the new grant. A run that
// could not be suspended stays where it was; one suspended whose resume
// failed stays suspended at its checkpoint: both are in NotMoved with the
// reason, which this runtime's log says in full. Runs suspended already
// are left alone. Without checkpoints the error is ErrNoCheckpoints.
func (r *Runtime) CheckpointGeneration(ctx context.Context, pool, gen string) (*runtimeapi.CheckpointGenerationResult, error) {
	if _, _, err := r.checkpointer(); err != nil {
		return nil, err
	}
	type open struct{ runID, token string }
	var todo []open
	r.mu.Lock()
	for _, c := range r.claims {
		c.mu.Lock()
		if c.pool == pool && c.gen.ID == gen && !c.released && !c.suspended && c.token != "" {
			todo = append(todo, open{c.runID, c.token})
		}
		c.mu.Unlock()
	}
	r.mu.Unlock()
	slices.SortFunc(todo, func(a, b open) int { return strings.Compare(a.runID, b.runID) })
	out := &runtimeapi.CheckpointGenerationResult{Moved: []runtimeapi.MovedRun{}}
	for _, o := range todo {
		// The runtime does not know the job's event sequence (the
		// control plane numbers a job's events, and the rollout that asks
		// knows no jobs): the attestation says so rather than name 0.
		cp, err := r.suspendAs(ctx, o.runID, CheckpointRequest{Token: o.token, EventSeqUnknown: true}, checkpoint.Suspended{By: "drain"})
		if err != nil {
			r.logf("runtime: drain of %s in pool %s: run %s not suspended: %v", gen, pool, o.runID, err)
			out.NotMoved = append(out.NotMoved, notMoved(o.runID, "", "suspend", err))
			continue
		}
		g, err := r.resumeAs(ctx, o.runID, o.token, runtimeapi.RestoredByDrain)
		if err != nil {
			r.logf("runtime: drain of %s in pool %s: run %s suspended at %s, not resumed: %v", gen, pool, o.runID, cp.Digest, err)
			out.NotMoved = append(out.NotMoved, notMoved(o.runID, cp.Digest, "resume", err))
			continue
		}
		out.Moved = append(out.Moved, runtimeapi.MovedRun{RunID: o.runID, Checkpoint: cp.Digest, From: gen, To: g.Generation,
			SandboxID: g.SandboxID, AllocationAttempt: g.AllocationAttempt})
	}
	return out, nil
}

// notMoved is a run CheckpointGeneration did not move, with the code of
// err and a reason that names no host path (the log has err in full).
func notMoved(runID, digest, stage string, err error) runtimeapi.NotMovedRun {
	code := errorCode(checkpointStatus(err), err)
	return runtimeapi.NotMovedRun{RunID: runID, Suspended: digest != "", Checkpoint: digest, Code: code,
		Reason: stage + " failed (" + code + "); the runtime's log says why"}
}

// drainRoutes serves a generation's checkpoint at a drain deadline.
func (s *Server) drainRoutes() {
	s.mux.Handle("POST /v1/pools/{pool}/generations/{generation}/checkpoint", s.auth(func(w http.ResponseWriter, r *http.Request) {
		res, err := s.rt.CheckpointGeneration(r.Context(), r.PathValue("pool"), r.PathValue("generation"))
		if err != nil {
			s.writeError(w, r, checkpointStatus(err), err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}))
}
