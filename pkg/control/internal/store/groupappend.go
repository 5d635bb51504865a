package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/slipway-dev/slipway/internal/groupcommit"
)

// appendGroups gathers concurrent appends of many jobs' streams into one
// transaction function (internal/groupcommit): each job's appends counted on its
// head together. A stream that has ended refuses its own append only.
type appendGroups = groupcommit.Queue[AppendIn, appendOutcome]

type PendingAppend = groupcommit.Member[AppendIn, appendOutcome]

type AppendIn struct {
	job string
	evs []NewEvent
}

type appendOutcome struct {
	last int64
	err  error
}

// maxAppendBatch bounds the appends of one group commit.
const maxAppendBatch = 512

// appendGrouped appends evs to job's stream with whatever others wait.
func (s *Store) appendGrouped(ctx context.Context, job string, evs []NewEvent) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return s.AwaitAppend(ctx, s.appends.Enqueue(AppendIn{job, evs}))
}

// AwaitAppend waits for p's commit (queued with s.appends.Enqueue: the
// appends of one stream commit in the order they were queued).
func (s *Store) AwaitAppend(ctx context.Context, p *PendingAppend) (int64, error) {
	o := s.appends.Await(p, maxAppendBatch, func(batch []*PendingAppend) {
		outs := s.commitAppends(context.WithoutCancel(ctx), batch)
		for i, b := range batch {
			b.Out = outs[i]
		}
	})
	return o.last, o.err
}

// commitAppends appends batch in one transaction, the appends to one job
// counted on its head together (in batch order); a batch whose transaction
// fails is retried one append at a time.
func (s *Store) commitAppends(ctx context.Context, batch []*PendingAppend) []appendOutcome {
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
		if len(p.In.evs) == 0 {
			continue
		}
		g := byJob[p.In.job]
		if g == nil {
			g = &appendGroup{job: p.In.job}
			byJob[p.In.job] = g
			gs = append(gs, g)
		}
		parts[i] = part{g, len(g.evs)}
		g.evs = append(g.evs, p.In.evs...)
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
				outs[i] = appendOutcome{err: fmt.Errorf("%w: job %s", ErrStreamEnded, p.In.job)}
			default:
				first := pt.g.last - int64(len(pt.g.evs)) + 1
				outs[i] = appendOutcome{last: first + int64(pt.offset+len(p.In.evs)) - 1}
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
			last, err = s.appendTx(ctx, tx, p.In.job, p.In.evs, now)
			return err
		})
		outs[i] = appendOutcome{last: last, err: err}
	}
	return outs
}

// EnqueueAppend queues evs for job's next group append; awaitAppend waits
// for its commit.
func (s *Store) EnqueueAppend(job string, evs []NewEvent) *PendingAppend {
	return s.appends.Enqueue(AppendIn{job, evs})
}
