package control

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// appendQueue gathers concurrent appends of many jobs' streams into one
// transaction (a group commit), as submitQueue does for submissions: an
// append that finds no commit running commits the queue itself; appends
// arriving meanwhile queue up and the first of them commits them all. A
// stream that has ended refuses its own append only.
type appendQueue struct {
	mu      sync.Mutex
	waiting []*pendingAppend
	leading bool
}

type pendingAppend struct {
	job  string
	evs  []NewEvent
	lead bool               // queued with no commit running: it commits
	done chan appendOutcome // buffered (1)
}

type appendOutcome struct {
	last int64
	err  error
	lead bool
}

// maxAppendBatch bounds the appends of one group commit.
const maxAppendBatch = 512

func (q *appendQueue) append(ctx context.Context, s *Store, job string, evs []NewEvent) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return q.await(ctx, s, q.enqueue(job, evs))
}

// enqueue queues an append: appends of one stream commit in the order
// they were queued. The caller awaits it.
func (q *appendQueue) enqueue(job string, evs []NewEvent) *pendingAppend {
	p := &pendingAppend{job: job, evs: evs, done: make(chan appendOutcome, 1)}
	q.mu.Lock()
	q.waiting = append(q.waiting, p)
	p.lead = !q.leading
	q.leading = true
	q.mu.Unlock()
	return p
}

// await waits for p's commit, committing the queue itself when it leads.
func (q *appendQueue) await(ctx context.Context, s *Store, p *pendingAppend) (int64, error) {
	if !p.lead {
		if o := <-p.done; !o.lead {
			return o.last, o.err
		}
	}
	var mine appendOutcome
	for {
		q.mu.Lock()
		batch := q.waiting
		if len(batch) > maxAppendBatch {
			batch = batch[:maxAppendBatch]
		}
		q.waiting = q.waiting[len(batch):]
		q.mu.Unlock()
		outs := s.commitAppends(context.WithoutCancel(ctx), batch)
		in := false
		for i, b := range batch {
			if b == p {
				mine, in = outs[i], true
				continue
			}
			b.done <- outs[i]
		}
		q.mu.Lock()
		if len(q.waiting) == 0 {
			q.leading = false
			q.mu.Unlock()
			return mine.last, mine.err
		}
		if !in {
			q.mu.Unlock()
			continue
		}
		next := q.waiting[0]
		q.mu.Unlock()
		next.done <- appendOutcome{lead: true}
		return mine.last, mine.err
	}
}

// commitAppends appends batch in one transaction, the appends to one job
// counted on its head together (in batch order); a batch whose transaction
// fails is retried one append at a time.
func (s *Store) commitAppends(ctx context.Context, batch []*pendingAppend) []appendOutcome {
	outs := make([]appendOutcome, len(batch))
	now := time.Now()
	type part struct {
		g      *appendGroup
		offset int // of the append's events in its group's
	}
	parts := make([]part, len(batch))
	var gs []*appendGroup
	byJob := map[string]*appendGroup{}
	ends := false
	for i, p := range batch {
		if len(p.evs) == 0 {
			continue
		}
		g := byJob[p.job]
		if g == nil {
			g = &appendGroup{job: p.job}
			byJob[p.job] = g
			gs = append(gs, g)
		}
		parts[i] = part{g, len(g.evs)}
		g.evs = append(g.evs, p.evs...)
	}
	for _, g := range gs {
		g.tally()
		ends = ends || g.ended == 1
	}
	// Only transitions append a result event, in transactions of their
	// own; were one queued, the appends after it must fail alone: one at
	// a time, below.
	err := errors.New("an append ends its stream")
	if !ends {
		err = s.tx(ctx, func(tx *sql.Tx) error { return s.appendGroupsTx(ctx, tx, gs, now) })
	}
	if err == nil {
		for i, p := range batch {
			pt := parts[i]
			switch {
			case pt.g == nil: // nothing to append
			case !pt.g.taken:
				outs[i] = appendOutcome{err: fmt.Errorf("%w: job %s", ErrStreamEnded, p.job)}
			default:
				first := pt.g.last - int64(len(pt.g.evs)) + 1
				outs[i] = appendOutcome{last: first + int64(pt.offset+len(p.evs)) - 1}
			}
		}
		return outs
	}
	if len(batch) == 1 && !ends {
		return []appendOutcome{{err: err}}
	}
	for i, p := range batch {
		var last int64
		err := s.tx(ctx, func(tx *sql.Tx) error {
			var err error
			last, err = s.appendTx(ctx, tx, p.job, p.evs, now)
			return err
		})
		outs[i] = appendOutcome{last: last, err: err}
	}
	return outs
}
