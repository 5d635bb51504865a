package control

import (
	"context"
	"database/sql"
	"sync"
)

// txQueue gathers the store's write transactions on SQLite into group
// commits. SQLite has one writer and a commit costs an fsync, so writes
// that arrive while one commits wait in any case; they wait here instead,
// and the first of them commits all of them in one transaction, each in a
// savepoint of its own: a transaction function that fails rolls back its
// own part only and gets its own error, and the others commit. Under load
// one fsync then carries many writes (a finish, a submission batch, a
// stream's appends, a delivery receipt) where each took its own, and a
// disk that stalls for tens of milliseconds leaves a queue that drains in
// one commit. PostgreSQL has concurrent writers and commits each alone.
type txQueue struct {
	mu      sync.Mutex
	waiting []*pendingTx
	leading bool
}

type pendingTx struct {
	f    func(*sql.Tx) error
	err  error
	lead bool
	done chan bool // buffered (1): false when committed (err set), true to lead
}

// maxTxGroup bounds the transaction functions of one group commit.
const maxTxGroup = 64

// run commits f with whatever others are waiting. Once queued it waits for
// the commit even if ctx ends (f sees ctx and fails on its own).
func (q *txQueue) run(ctx context.Context, s *Store, f func(*sql.Tx) error) error {
	p := &pendingTx{f: f, done: make(chan bool, 1)}
	q.mu.Lock()
	q.waiting = append(q.waiting, p)
	p.lead = !q.leading
	q.leading = true
	q.mu.Unlock()
	if !p.lead && !<-p.done {
		return p.err
	}
	for {
		q.mu.Lock()
		batch := q.waiting
		if len(batch) > maxTxGroup {
			batch = batch[:maxTxGroup]
		}
		q.waiting = q.waiting[len(batch):]
		q.mu.Unlock()
		s.commitGroup(context.WithoutCancel(ctx), batch)
		mine := false
		for _, b := range batch {
			if b == p {
				mine = true
				continue
			}
			b.done <- false
		}
		q.mu.Lock()
		if len(q.waiting) == 0 {
			q.leading = false
			q.mu.Unlock()
			return p.err
		}
		if !mine {
			q.mu.Unlock()
			continue // p is still waiting: commit the next group
		}
		next := q.waiting[0]
		q.mu.Unlock()
		next.done <- true
		return p.err
	}
}

// commitGroup commits batch in one transaction, each function in its own
// savepoint, and sets each one's outcome. When the group itself fails (the
// begin, a savepoint, the commit) nothing of it was written and each
// function runs again alone.
func (s *Store) commitGroup(ctx context.Context, batch []*pendingTx) {
	if len(batch) == 1 {
		batch[0].err = s.txAlone(ctx, batch[0].f)
		return
	}
	if s.groupTx(ctx, batch) == nil {
		return
	}
	for _, p := range batch {
		p.err = s.txAlone(ctx, p.f)
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
		p.err = p.f(tx)
		if p.err != nil {
			p.err = unavailable(p.err)
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
