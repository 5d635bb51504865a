package control

import (
	"context"
	"database/sql"
	"errors"
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
	p := &pendingAppend{job: job, evs: evs, done: make(chan appendOutcome, 1)}
	q.mu.Lock()
	q.waiting = append(q.waiting, p)
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	if !lead {
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

// commitAppends appends batch in one transaction; a batch whose
// transaction fails is retried one append at a time.
func (s *Store) commitAppends(ctx context.Context, batch []*pendingAppend) []appendOutcome {
	outs := make([]appendOutcome, len(batch))
	now := time.Now()
	err := s.tx(ctx, func(tx *sql.Tx) error {
		for i, p := range batch {
			last, err := s.appendTx(ctx, tx, p.job, p.evs, now)
			switch {
			case errors.Is(err, ErrStreamEnded):
				outs[i] = appendOutcome{err: err} // nothing of it written
			case err != nil:
				return err
			default:
				outs[i] = appendOutcome{last: last}
			}
		}
		return nil
	})
	if err == nil {
		return outs
	}
	if len(batch) == 1 {
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
