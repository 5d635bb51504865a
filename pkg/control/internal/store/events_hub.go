package store

import (
	"context"
	"database/sql"
	"maps"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/slipway-dev/slipway/pkg/api/controlapi"
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
	txs    map[*sql.Tx]map[string][]controlapi.Event
	tails  map[string]*tail
	listen bool
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

// tail keeps the last events a followed job's stream committed in this
// process, in sequence without gaps, so its readers need not read them
// back from the store: an SSE reader takes the events that follow its
// last straight from the tail (committed events never change; one that
// retention deleted meanwhile is still one the reader had not seen), and
// reads the head and events from the store only when the tail does not
// hold its next event. It is a cache: losing it costs a read.
type tail struct {
	evs   []controlapi.Event
	bytes int
}

// Bounds of one job's tail.
const (
	tailEvents = 512
	tailBytes  = 128 << 10
)

// SetEventConfig sets the streams' retention and bounds (the Plane sets
// its Config.Events).
func (s *Store) SetEventConfig(c EventConfig) {
	c = c.WithDefaults()
	s.ev.mu.Lock()
	s.ev.cfg = &c
	s.ev.mu.Unlock()
}

func (h *eventHub) retention() EventConfig {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cfg == nil {
		return EventConfig{}.WithDefaults()
	}
	return *h.cfg
}

// pending notes that tx appended evs to job's stream (nil: appended
// without them at hand, which voids the job's tail at commit).
func (h *eventHub) pending(tx *sql.Tx, job string, evs []controlapi.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.txs == nil {
		h.txs = map[*sql.Tx]map[string][]controlapi.Event{}
	}
	m := h.txs[tx]
	if m == nil {
		m = map[string][]controlapi.Event{}
		h.txs[tx] = m
	}
	if evs == nil {
		m[job] = nil
		return
	}
	if prev, ok := m[job]; ok && prev == nil {
		return
	}
	m[job] = append(m[job], evs...)
}

// mark is what tx has appended so far, for restore.
func (h *eventHub) mark(tx *sql.Tx) map[string][]controlapi.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.txs[tx])
}

// restore forgets what tx appended since mark (a savepoint rolled back):
// the slices mark holds keep their lengths.
func (h *eventHub) restore(tx *sql.Tx, mark map[string][]controlapi.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if mark == nil {
		delete(h.txs, tx)
		return
	}
	h.txs[tx] = mark
}

// followed says whether job has readers here (only they keep a tail).
func (h *eventHub) followed(job string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[job]) > 0
}

// done wakes the readers of what tx appended, if it committed, after
// adding it to the tails of followed jobs.
func (h *eventHub) done(tx *sql.Tx, committed bool) {
	h.mu.Lock()
	jobs := h.txs[tx]
	delete(h.txs, tx)
	if committed {
		for j, evs := range jobs {
			h.extend(j, evs)
		}
	}
	h.mu.Unlock()
	if committed {
		for j := range jobs {
			h.notify(j)
		}
	}
}

// extend adds committed events to job's tail if the job is followed here
// (h.mu held): a gap or an append without its events starts it afresh.
func (h *eventHub) extend(job string, evs []controlapi.Event) {
	if len(h.subs[job]) == 0 {
		return
	}
	if h.tails == nil {
		h.tails = map[string]*tail{}
	}
	t := h.tails[job]
	if evs == nil {
		delete(h.tails, job)
		return
	}
	if t == nil || len(t.evs) == 0 || t.evs[len(t.evs)-1].Seq+1 != evs[0].Seq {
		t = &tail{}
		h.tails[job] = t
	}
	for _, e := range evs {
		t.evs = append(t.evs, e)
		t.bytes += len(e.Data)
	}
	drop := 0
	for len(t.evs)-drop > tailEvents || (t.bytes > tailBytes && len(t.evs)-drop > 1) {
		t.bytes -= len(t.evs[drop].Data)
		drop++
	}
	// Resliced, not copied: append moves the live events when it grows
	// the array, and events once written are never changed, so readers
	// keep the slices they were given.
	t.evs = t.evs[drop:]
}

// fromTail returns the events of job after after up to last (at most
// limit), if its tail holds every one of them.
func (h *eventHub) fromTail(job string, after, last int64, limit int) ([]controlapi.Event, bool) {
	n := min(int(last-after), limit)
	evs := h.nextFromTail(job, after, n)
	return evs, len(evs) == n
}

// nextFromTail returns the events of job's tail that follow after (at
// most limit), if the tail holds the one right after it: committed
// events, in sequence, that need no read of the store.
func (h *eventHub) nextFromTail(job string, after int64, limit int) []controlapi.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.tails[job]
	if t == nil || len(t.evs) == 0 {
		return nil
	}
	first, last := t.evs[0].Seq, t.evs[len(t.evs)-1].Seq
	if after+1 < first || after >= last {
		return nil
	}
	i := int(after + 1 - first)
	n := min(i+limit, len(t.evs))
	return t.evs[i:n:n]
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

// Subscribe returns a channel woken when job's stream may have grown.
func (s *Store) Subscribe(job string) (<-chan struct{}, func()) {
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
			delete(h.tails, job)
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

// FromTail returns the events after after (at most limit) from the tail
// of a followed job, if the tail holds them (nil: read the store).
func (s *Store) FromTail(job string, after int64, limit int) []controlapi.Event {
	return s.ev.nextFromTail(job, after, limit)
}
