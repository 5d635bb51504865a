package store

import (
	"context"
	"database/sql"

	"github.com/slipway-dev/slipway/internal/groupcommit"
	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// submitGroups gathers concurrent submissions into one transaction
// function (internal/groupcommit): one multi-row insert and one admission pass for
// all of them. Each submission keeps its own outcome: a refusal (a bound, a
// reused key) writes nothing of it and spoils nothing of the others. A
// batch whose transaction fails is retried one submission at a time, so
// one bad row never fails its neighbours.
type submitGroups = groupcommit.Queue[Submission, SubmitOutcome]

type pendingSubmit = groupcommit.Member[Submission, SubmitOutcome]

type SubmitOutcome struct {
	Job     *controlapi.Job
	Created bool
	Err     error
	// AdmissionRan says admission ran in the transaction that stored the job
	// (the job was admitted there if it could be): no wake-up is needed.
	AdmissionRan bool
}

// maxBatch bounds a group commit.
const maxBatch = 256

// Insert stores a submission with whatever others are waiting. Once queued
// it waits for the commit even if ctx ends, so an error always means the
// job was not stored.
func (s *Store) Insert(ctx context.Context, sub Submission) SubmitOutcome {
	if err := ctx.Err(); err != nil {
		return SubmitOutcome{Err: err}
	}
	return s.submits.Await(s.submits.Enqueue(sub), maxBatch, func(batch []*pendingSubmit) {
		s.commitBatch(context.WithoutCancel(ctx), batch)
	})
}

// commitBatch commits batch in one transaction and sets each one's outcome.
func (s *Store) commitBatch(ctx context.Context, batch []*pendingSubmit) {
	var outs []SubmitOutcome
	var seen queueCounts
	var admitted []*controlapi.Job
	ran := false
	ba := batch[0].In.Admit
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		admitted, ran = nil, false
		if outs, seen, err = s.insertBatch(ctx, tx, batch); err != nil || ba == nil {
			return err
		}
		for _, o := range outs {
			if o.Created {
				admitted, err = s.admitTx(ctx, tx, ba.Slots, ba.Limits, ba.Decide)
				ran = err == nil
				return err
			}
		}
		return nil
	})
	if err == nil {
		s.queuesSeen(seen)
		for i, o := range outs {
			outs[i].AdmissionRan = ran
			if o.Created {
				s.storedProfiles.Store(o.Job.Profile.Digest, struct{}{}) // committed
			}
		}
	}
	if err == nil && len(admitted) > 0 && ba.After != nil {
		ba.After(admitted)
	}
	if err != nil {
		outs = make([]SubmitOutcome, len(batch))
	}
	if err != nil && len(batch) > 1 {
		for i, p := range batch {
			j, c, err := s.insertAlone(ctx, p.In)
			outs[i] = SubmitOutcome{Job: j, Created: c, Err: err}
		}
	} else if err != nil {
		j, c, err2 := s.insertAlone(ctx, batch[0].In)
		if isUniqueViolation(err) {
			outs[0] = SubmitOutcome{Job: j, Created: c, Err: err2}
		} else {
			outs[0] = SubmitOutcome{Err: err}
		}
	}
	for i, p := range batch {
		p.Out = outs[i]
	}
}
