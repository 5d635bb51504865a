package control

import (
	"context"
	"database/sql"
	"sync"
)

// submitQueue gathers concurrent submissions into one transaction (a group
// commit): a submit that finds no commit running commits the queue itself;
// submits arriving meanwhile queue up, and when that commit is done the
// first of them commits all of them. Each submission keeps its own outcome:
// a refusal (a bound, a reused key) writes nothing of it and spoils
// nothing of the others. A batch whose transaction fails is retried one
// submission at a time, so one bad row never fails its neighbours.
type submitQueue struct {
	mu      sync.Mutex
	waiting []*pendingSubmit
	leading bool
}

type pendingSubmit struct {
	sub  submission
	done chan submitOutcome // buffered (1)
}

type submitOutcome struct {
	job     *Job
	created bool
	err     error
	lead    bool // the previous commit is done: commit the queue now
}

// maxBatch bounds a group commit.
const maxBatch = 256

// insert stores a submission with whatever others are waiting. Once queued
// it waits for the commit even if ctx ends, so an error always means the
// job was not stored.
func (s *Store) insert(ctx context.Context, sub submission) (*Job, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	q := &s.submits
	p := &pendingSubmit{sub: sub, done: make(chan submitOutcome, 1)}
	q.mu.Lock()
	q.waiting = append(q.waiting, p)
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	if !lead {
		if o := <-p.done; !o.lead {
			return o.job, o.created, o.err
		}
	}
	for {
		q.mu.Lock()
		batch := q.waiting
		if len(batch) > maxBatch {
			batch = batch[:maxBatch]
		}
		q.waiting = q.waiting[len(batch):]
		q.mu.Unlock()
		mine := s.commitBatch(context.WithoutCancel(ctx), batch, p)
		q.mu.Lock()
		if len(q.waiting) == 0 {
			q.leading = false
			q.mu.Unlock()
			return mine.job, mine.created, mine.err
		}
		if !contains(batch, p) {
			q.mu.Unlock()
			continue // p is still waiting: commit the next batch
		}
		next := q.waiting[0]
		q.mu.Unlock()
		next.done <- submitOutcome{lead: true}
		return mine.job, mine.created, mine.err
	}
}

func contains(b []*pendingSubmit, p *pendingSubmit) bool {
	for _, x := range b {
		if x == p {
			return true
		}
	}
	return false
}

// commitBatch commits batch in one transaction and tells each its outcome
// (returning, not sending, mine's).
func (s *Store) commitBatch(ctx context.Context, batch []*pendingSubmit, mine *pendingSubmit) submitOutcome {
	var outs []submitOutcome
	var admitted []*Job
	ba := batch[0].sub.admit
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		if outs, err = s.insertBatch(ctx, tx, batch); err != nil || ba == nil {
			return err
		}
		for _, o := range outs {
			if o.created {
				admitted, err = s.admitTx(ctx, tx, ba.slots, ba.limits, ba.decide)
				return err
			}
		}
		return nil
	})
	if err == nil && len(admitted) > 0 && ba.after != nil {
		ba.after(admitted)
	}
	if err != nil {
		outs = make([]submitOutcome, len(batch))
	}
	if err != nil && len(batch) > 1 {
		for i, p := range batch {
			j, c, err := s.insertAlone(ctx, p.sub)
			outs[i] = submitOutcome{job: j, created: c, err: err}
		}
	} else if err != nil {
		j, c, err2 := s.insertAlone(ctx, batch[0].sub)
		if isUniqueViolation(err) {
			outs[0] = submitOutcome{job: j, created: c, err: err2}
		} else {
			outs[0] = submitOutcome{err: err}
		}
	}
	var out submitOutcome
	for i, p := range batch {
		if p == mine {
			out = outs[i]
			continue
		}
		p.done <- outs[i]
	}
	return out
}
