package cost

import "time"

// tally ends sandbox id's live interval at at and starts next (nil: none).
func (l *Ledger) tally(id string, next *poolState, at time.Time) {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	if prev, ok := l.live[id]; ok {
		l.closed[prev.poolState] += max(at.Sub(prev.start).Seconds(), 0)
		delete(l.live, id)
	}
	if next != nil {
		l.live[id] = liveInterval{*next, at}
	}
}

// StateSeconds is the time a pool's sandboxes spent in one state.
type StateSeconds struct {
	Pool    string
	State   State
	Seconds float64
}

// Totals returns the time per pool and state recorded since the Ledger
// was opened, open intervals counted to now: a counter for metrics (the
// ledger's file holds the history).
func (l *Ledger) Totals() []StateSeconds {
	now := l.now()
	l.tmu.Lock()
	sum := make(map[poolState]float64, len(l.closed))
	for k, v := range l.closed {
		sum[k] = v
	}
	for _, iv := range l.live {
		sum[iv.poolState] += max(now.Sub(iv.start).Seconds(), 0)
	}
	l.tmu.Unlock()
	out := make([]StateSeconds, 0, len(sum))
	for k, v := range sum {
		out = append(out, StateSeconds{Pool: k.pool, State: k.state, Seconds: v})
	}
	return out
}
