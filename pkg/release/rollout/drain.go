package rollout

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/pool"
)

// Checkpointer is a Fleet that moves a generation's open runs through
// checkpoints onto the pool's active generation (a runtime that keeps
// checkpoints: runtimeapi.Client against `runtime serve
// --checkpoint-key`). The drain uses it at the deadline of a pool with
// onDrainDeadline: checkpoint.
type Checkpointer interface {
	CheckpointGeneration(ctx context.Context, pool, generation string) (*runtimeapi.CheckpointGenerationResult, error)
}

// drainCheckpoint is the drain deadline with onDrainDeadline: checkpoint:
// the fleet suspends each run still open on the old generation and
// resumes it on the new one. The commit's body is the evidence: each run
// moved, with its checkpoint and its new sandbox, and each run not moved
// with why. The runs not moved are listed as draining. It returns the
// rollout, or the failed rollout when the fleet cannot checkpoint.
func (d *Driver) drainCheckpoint(ctx context.Context, r *pool.Rollout) (*pool.Rollout, *pool.Rollout, error) {
	cf, ok := d.Fleet.(Checkpointer)
	if !ok {
		failed, err := d.advance(ctx, r, d.failed(fmt.Sprintf("step 5: drain deadline reached, onDrainDeadline is checkpoint but the fleet (%T) cannot checkpoint runs", d.Fleet)))
		return r, failed, err
	}
	res, err := cf.CheckpointGeneration(ctx, d.Pool, r.From)
	if err != nil {
		failed, err := d.advance(ctx, r, d.failed("step 5: drain deadline reached, checkpointing the runs of "+r.From+" failed: "+err.Error()))
		return r, failed, err
	}
	r, err = d.advance(ctx, r, func(v *view, r *pool.Rollout, now time.Time) (string, string, string, error) {
		var body []string
		r.Draining = nil
		checkpointed := len(res.Moved) // moved runs, and suspended ones a resume did not take
		for _, m := range res.Moved {
			body = append(body, fmt.Sprintf("Checkpointed: %s at %s, resumed on %s in sandbox %s (allocation attempt %d)", m.RunID, m.Checkpoint, m.To, m.SandboxID, m.AllocationAttempt))
		}
		for _, n := range res.NotMoved {
			r.Draining = append(r.Draining, n.RunID)
			if n.Suspended {
				checkpointed++
				body = append(body, fmt.Sprintf("Not moved: %s, suspended at %s: %s", n.RunID, n.Checkpoint, n.Reason))
			} else {
				body = append(body, fmt.Sprintf("Not moved: %s, still open on %s: %s", n.RunID, r.From, n.Reason))
			}
		}
		if len(body) == 0 {
			body = append(body, "No run was open with a sandbox on "+r.From+".")
		}
		r.PhaseDeadline = now.Add(deadline(v.pool, PhaseDrain)).Truncate(time.Second)
		return "drain-checkpoint", fmt.Sprintf("drain deadline of %s in pool %s: checkpointed %s and resumed %d on %s", r.From, d.Pool,
			plural(checkpointed, "run"), len(res.Moved), r.To), strings.Join(body, "\n"), nil
	})
	return r, nil, err
}
