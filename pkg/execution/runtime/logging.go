package runtime

import (
	"fmt"
	"io"
	"sync"
)

// lineLog writes whole lines to a writer, one at a time; the zero value
// (and one on a nil writer) discards them.
type lineLog struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineLog) printf(format string, args ...any) {
	if l == nil || l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}

// WarmOption configures NewWarm.
type WarmOption func(*Warm)

// WithWarmLog sends one line per failed sandbox create (refill or cold
// start) to w, with the pool, generation, owner and the reason; nil keeps
// the default, none.
func WithWarmLog(w io.Writer) WarmOption {
	return func(wm *Warm) { wm.log = &lineLog{w: w} }
}

// SyncerOption configures NewSyncer.
type SyncerOption func(*Syncer)

// WithSyncLog sends one line per failed sync of the config repository to
// w, with the reason and the revision still served (whose age makes claims
// stale), and one when a sync succeeds again; nil keeps the default, none.
func WithSyncLog(w io.Writer) SyncerOption {
	return func(s *Syncer) { s.log = &lineLog{w: w} }
}
