package control

import (
	"context"
	"time"
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
