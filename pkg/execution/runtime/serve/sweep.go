package serve

import (
	"context"
	"fmt"
	"time"
)

// DefaultCheckpointSweep is how often a runtime that keeps checkpoints
// deletes those whose pool's restore window has closed.
const DefaultCheckpointSweep = 10 * time.Minute

// sweepCheckpoints deletes, every CheckpointSweepEvery until ctx ends,
// the checkpoints whose restore window has closed (Runtime.SweepCheckpoints:
// never one inside its window or an open run's head), and logs what went.
func sweepCheckpoints(ctx context.Context, c Config, p *parts) {
	every := c.CheckpointSweepEvery
	if every <= 0 {
		every = DefaultCheckpointSweep
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		got, err := p.rt.SweepCheckpoints(ctx, time.Now(), false)
		if err != nil {
			fmt.Fprintf(c.Log, "checkpoint sweep: %v\n", err)
			continue
		}
		if pub := got.Published; pub != nil && len(pub.Deleted) > 0 {
			fmt.Fprintf(c.Log, "checkpoint sweep: deleted %d checkpoints past their restore window from %s with their signatures and attestations, kept %d, left %d not verified with this runtime's key\n",
				len(pub.Deleted), pub.Repository, pub.Kept, len(pub.Unjudged))
		}
		if len(got.Deleted) > 0 {
			fmt.Fprintf(c.Log, "checkpoint sweep: deleted %d checkpoints past their restore window (%d blobs, %d bytes), kept %d\n",
				len(got.Deleted), got.Blobs, got.Bytes, got.Kept)
		}
	}
}
