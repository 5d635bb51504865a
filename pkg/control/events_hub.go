package control

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// eventHub wakes the readers of a job's stream when it grows: at the
// commit of the appending transaction in this process, and on PostgreSQL
// also at every NOTIFY from any replica (LISTEN on a connection of its
// own). A wake-up carries no data: readers read the store, so a lost or
// doubled wake-up loses or repeats nothing.
type eventHub struct {
	mu     sync.Mutex
	cfg    *EventConfig
	subs   map[string]map[chan struct{}]struct{}
	txs    map[*sql.Tx]map[string]struct{}
	listen bool
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

// SetEventConfig sets the streams' retention and bounds (the Plane sets
// its Config.Events).
func (s *Store) SetEventConfig(c EventConfig) {
	c = c.withDefaults()
	s.ev.mu.Lock()
	s.ev.cfg = &c
	s.ev.mu.Unlock()
}

func (h *eventHub) retention() EventConfig {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cfg == nil {
		return EventConfig{}.withDefaults()
	}
	return *h.cfg
}

// pending notes that tx appended to job's stream.
func (h *eventHub) pending(tx *sql.Tx, job string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.txs == nil {
		h.txs = map[*sql.Tx]map[string]struct{}{}
	}
	if h.txs[tx] == nil {
		h.txs[tx] = map[string]struct{}{}
	}
	h.txs[tx][job] = struct{}{}
}

// done wakes the readers of what tx appended, if it committed.
func (h *eventHub) done(tx *sql.Tx, committed bool) {
	h.mu.Lock()
	jobs := h.txs[tx]
	delete(h.txs, tx)
	h.mu.Unlock()
	if committed {
		for j := range jobs {
			h.notify(j)
		}
	}
}

func (h *eventHub) notify(job string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[job] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (h *eventHub) notifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.subs {
		for ch := range m {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// subscribe returns a channel woken when job's stream may have grown.
func (s *Store) subscribe(job string) (<-chan struct{}, func()) {
	h := &s.ev
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[string]map[chan struct{}]struct{}{}
	}
	if h.subs[job] == nil {
		h.subs[job] = map[chan struct{}]struct{}{}
	}
	h.subs[job][ch] = struct{}{}
	if s.d.name == "postgres" && !h.listen {
		h.listen = true
		ctx, cancel := context.WithCancel(context.Background())
		h.stop = cancel
		h.wg.Add(1)
		go func() { defer h.wg.Done(); s.listenLoop(ctx) }()
	}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs[job], ch)
		if len(h.subs[job]) == 0 {
			delete(h.subs, job)
		}
		h.mu.Unlock()
	}
}

// listenLoop LISTENs for appends of every replica until ctx ends,
// reconnecting after a failure (readers are woken then, to re-read).
func (s *Store) listenLoop(ctx context.Context) {
	for ctx.Err() == nil {
		err := func() error {
			conn, err := pgx.Connect(ctx, s.dsn)
			if err != nil {
				return err
			}
			defer conn.Close(context.WithoutCancel(ctx))
			if _, err := conn.Exec(ctx, "LISTEN "+pgNotifyChannel); err != nil {
				return err
			}
			s.ev.notifyAll() // anything appended while no one listened
			for {
				n, err := conn.WaitForNotification(ctx)
				if err != nil {
					return err
				}
				s.ev.notify(n.Payload)
			}
		}()
		if ctx.Err() != nil {
			return
		}
		s.ev.notifyAll()
		_ = err
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// close stops the listener.
func (h *eventHub) close() {
	h.mu.Lock()
	stop := h.stop
	h.mu.Unlock()
	if stop != nil {
		stop()
	}
	h.wg.Wait()
}
