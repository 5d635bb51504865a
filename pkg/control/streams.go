package control

import (
	"context"
	"log/slog"
	"time"

	"github.com/slipway-dev/slipway/pkg/control/internal/store"
)

// retainEvents applies the event streams' time retention (c.MaxAge) to
// st every minute (a tenth of MaxAge when that is shorter) until ctx ends.
func retainEvents(ctx context.Context, st *store.Store, c EventConfig, log *slog.Logger) {
	every := min(time.Minute, c.MaxAge/10)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for {
			n, err := st.TrimEvents(ctx, time.Now(), 100)
			if err != nil && ctx.Err() == nil {
				log.Warn("event retention", "err", err)
			}
			if err != nil || n < 100 {
				break
			}
		}
	}
}
