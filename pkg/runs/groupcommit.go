package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// createQueue gathers concurrent Creates into one transaction (a group
// commit). With synchronous=FULL each commit waits for the disk to flush
// the write-ahead log, and there is one writer: one commit per Create
// would make the last of n concurrent Creates wait for n flushes in a row.
// A Create that finds no commit running commits the queue itself; Creates
// arriving meanwhile queue up, and when that commit is done the first of
// them commits all of them, with one flush.
type createQueue struct {
	mu      sync.Mutex
	waiting []*pendingCreate
	leading bool // a Create is committing
	commits int  // transactions committed, for tests
}

type pendingCreate struct {
	runID string
	args  []any              // of SQLite.insert
	done  chan createOutcome // buffered (1): the committer never blocks
}

type createOutcome struct {
	err  error
	lead bool // the previous commit is done: commit the queue now
}

// create is Create: m is checked and encoded by the caller's goroutine, then
// committed with whatever other Creates are waiting. Once queued it waits
// for the commit even if ctx ends, so that an error always means the
// manifest was not stored.
func (s *SQLite) create(ctx context.Context, m *Manifest) error {
	p, err := pendingOf(m)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("runs: create %s: %w", p.runID, err)
	}
	q := &s.creates
	q.mu.Lock()
	q.waiting = append(q.waiting, p)
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	if !lead {
		if o := <-p.done; !o.lead {
			return o.err
		}
	}
	q.mu.Lock()
	batch := q.waiting // p among them
	q.waiting = nil
	q.mu.Unlock()
	s.commitCreates(context.WithoutCancel(ctx), batch)
	q.mu.Lock()
	q.commits++
	if len(q.waiting) > 0 {
		q.waiting[0].done <- createOutcome{lead: true}
	} else {
		q.leading = false
	}
	q.mu.Unlock()
	return (<-p.done).err
}

// pendingOf checks m and makes its row.
func pendingOf(m *Manifest) (*pendingCreate, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: manifest: nil", ErrInvalid)
	}
	m = m.clone()
	if m.Status == "" {
		m.Status = StatusGranted
	}
	m.normalize()
	if err := m.validate(); err != nil {
		return nil, err
	}
	doc, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("runs: create %s: %w", m.RunID, err)
	}
	args := []any{m.RunID, string(m.Status)}
	for _, v := range m.columnValues() {
		args = append(args, v)
	}
	args = append(args, string(doc)) // text, as the JSON functions expect
	return &pendingCreate{runID: m.RunID, args: args, done: make(chan createOutcome, 1)}, nil
}

// commitCreates stores batch in one transaction and tells each Create its
// outcome: a run id stored before gets ErrExists and the others are
// stored. If the transaction fails, each is tried in a transaction of its
// own, so that one Create's failure is not the others'.
func (s *SQLite) commitCreates(ctx context.Context, batch []*pendingCreate) {
	exists, err := s.insertBatch(ctx, batch)
	if err != nil && len(batch) > 1 {
		for _, p := range batch {
			s.commitCreates(ctx, []*pendingCreate{p})
		}
		return
	}
	for i, p := range batch {
		switch {
		case err != nil:
			p.done <- createOutcome{err: err}
		case exists[i]:
			p.done <- createOutcome{err: fmt.Errorf("%w: %s", ErrExists, p.runID)}
		default:
			p.done <- createOutcome{}
		}
	}
}

// insertBatch inserts batch in one transaction; exists says which run ids
// were stored before (those rows are left alone).
func (s *SQLite) insertBatch(ctx context.Context, batch []*pendingCreate) (exists []bool, err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("runs: create: %w", err)
	}
	defer tx.Rollback()
	insert := tx.StmtContext(ctx, s.insert)
	exists = make([]bool, len(batch))
	for i, p := range batch {
		res, err := insert.ExecContext(ctx, p.args...)
		if err != nil {
			return nil, fmt.Errorf("runs: create %s: %w", p.runID, err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return nil, fmt.Errorf("runs: create %s: %w", p.runID, err)
		}
		exists[i] = k == 0
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("runs: create: commit: %w", err)
	}
	return exists, nil
}
