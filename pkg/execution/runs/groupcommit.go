package runs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/slipway-dev/slipway/internal/groupcommit"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// creates gathers concurrent Creates into one transaction (a group
// commit, internal/groupcommit). With synchronous=FULL each commit waits for the
// disk to flush the write-ahead log, and there is one writer: one commit
// per Create would make the last of n concurrent Creates wait for n
// flushes in a row.
type createQueue = groupcommit.Queue[createIn, error]

type pendingCreate = groupcommit.Member[createIn, error]

// createIn is a checked manifest's row.
type createIn struct {
	runID string
	args  []any // of SQLite.insert
}

// create is Create: m is checked and encoded by the caller's goroutine, then
// committed with whatever other Creates are waiting. Once queued it waits
// for the commit even if ctx ends, so that an error always means the
// manifest was not stored.
func (s *SQLite) create(ctx context.Context, m *runmanifest.Manifest) error {
	in, err := pendingOf(m)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("runs: create %s: %w", in.runID, err)
	}
	return s.creates.Await(s.creates.Enqueue(in), 0, func(batch []*pendingCreate) {
		s.commitCreates(context.WithoutCancel(ctx), batch)
		s.createCommits.Add(1)
	})
}

// pendingOf checks m and makes its row.
func pendingOf(m *runmanifest.Manifest) (createIn, error) {
	if m == nil {
		return createIn{}, fmt.Errorf("%w: manifest: nil", ErrInvalid)
	}
	m = m.Clone()
	if m.Status == "" {
		m.Status = runmanifest.StatusGranted
	}
	m.Normalize()
	if err := m.Validate(); err != nil {
		return createIn{}, err
	}
	doc, err := json.Marshal(m)
	if err != nil {
		return createIn{}, fmt.Errorf("runs: create %s: %w", m.RunID, err)
	}
	args := []any{m.RunID, string(m.Status)}
	for _, v := range manifestColumns(m) {
		args = append(args, v)
	}
	args = append(args, string(doc)) // text, as the JSON functions expect
	return createIn{runID: m.RunID, args: args}, nil
}

// commitCreates stores batch in one transaction and sets each Create's
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
			p.Out = err
		case exists[i]:
			p.Out = fmt.Errorf("%w: %s", ErrExists, p.In.runID)
		default:
			p.Out = nil
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
		res, err := insert.ExecContext(ctx, p.In.args...)
		if err != nil {
			return nil, fmt.Errorf("runs: create %s: %w", p.In.runID, err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return nil, fmt.Errorf("runs: create %s: %w", p.In.runID, err)
		}
		exists[i] = k == 0
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("runs: create: commit: %w", err)
	}
	return exists, nil
}
