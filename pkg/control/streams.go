package control

import (
	"context"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/control/internal/stream"
)

// retentionLoop applies the time retention every minute (a tenth of
// MaxAge when that is shorter).
func (p *Plane) retentionLoop(ctx context.Context) {
	every := min(time.Minute, p.c.Events.MaxAge/10)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for {
			n, err := p.st.TrimEvents(ctx, time.Now(), 100)
			if err != nil && ctx.Err() == nil {
				p.c.Logger.Warn("event retention", "err", err)
			}
			if err != nil || n < 100 {
				break
			}
		}
	}
}

// newOutputStream starts job j's output stream (internal/stream).
func (p *Plane) newOutputStream(j *controlapi.Job) *stream.Output {
	return stream.NewOutput(p.st, j, p.c.Events, &p.streams, p.c.Logger.Warn)
}

// newBoundedOutput keeps a job's bounded output: its head and its tail
// within maxBytes and maxLines (internal/stream).
func newBoundedOutput(maxBytes, maxLines int64) *stream.Bounded {
	return stream.NewBounded(maxBytes, maxLines)
}
