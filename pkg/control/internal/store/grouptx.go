package store

import (
	"context"
	"database/sql"

	"github.com/slipway-dev/slipway/internal/groupcommit"
)

// txGroups gathers the store's write transactions on SQLite into group
// commits (internal/groupcommit). SQLite has one writer and a commit costs an
// fsync, so writes that arrive while one commits wait in any case; they
// wait in the queue instead and commit as one transaction, each function
// in a savepoint of its own: one that fails rolls back its own part only
// and gets its own error, and the others commit. Under load one fsync
// then carries many writes (a finish, a submission batch, a stream's
// appends, a delivery receipt) where each took its own, and a disk that
// stalls for tens of milliseconds leaves a queue that drains in one
// commit. PostgreSQL has concurrent writers and commits each alone.
type txGroups = groupcommit.Queue[func(*sql.Tx) error, error]

type pendingTx = groupcommit.Member[func(*sql.Tx) error, error]

// maxTxGroup bounds the transaction functions of one group commit.
const maxTxGroup = 64

// groupedTx commits f with whatever others are waiting. Once queued it
// waits for the commit even if ctx ends (f sees ctx and fails on its own).
func (s *Store) groupedTx(ctx context.Context, f func(*sql.Tx) error) error {
	return s.txs.Await(s.txs.Enqueue(f), maxTxGroup, func(batch []*pendingTx) {
		s.commitGroup(context.WithoutCancel(ctx), batch)
	})
}

// commitGroup commits batch in one transaction, each function in its own
// savepoint, and sets each one's outcome. When the group itself fails (the
// begin, a savepoint, the commit) nothing of it was written and each
// function runs again alone.
func (s *Store) commitGroup(ctx context.Context, batch []*pendingTx) {
	if len(batch) == 1 {
		batch[0].Out = s.txAlone(ctx, batch[0].In)
		return
	}
	if s.groupTx(ctx, batch) == nil {
		return
	}
	for _, p := range batch {
		p.Out = s.txAlone(ctx, p.In)
	}
}

// groupTx is commitGroup's one transaction; an error means it did not
// commit.
func (s *Store) groupTx(ctx context.Context, batch []*pendingTx) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		_ = tx.Rollback()
		s.ev.done(tx, false)
		return err
	}
	for _, p := range batch {
		if _, err := tx.ExecContext(ctx, "SAVEPOINT grouped"); err != nil {
			return fail(err)
		}
		mark := s.ev.mark(tx)
		p.Out = p.In(tx)
		if p.Out != nil {
			p.Out = Unavailable(p.Out)
			s.ev.restore(tx, mark)
			// A failed statement may have ended the whole transaction
			// (an interrupt, a full disk): then this fails too.
			if _, err := tx.ExecContext(ctx, "ROLLBACK TO grouped"); err != nil {
				return fail(err)
			}
		}
		if _, err := tx.ExecContext(ctx, "RELEASE grouped"); err != nil {
			return fail(err)
		}
	}
	err = tx.Commit()
	s.ev.done(tx, err == nil)
	return err
}
