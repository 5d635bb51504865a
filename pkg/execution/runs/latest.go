package runs

import (
	"context"
	"fmt"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// Latest returns the manifests of the newest runs (by creation), newest
// first, at most limit of them (1000 when limit is 0 or more than 10000).
// It is for operator views over a runtime's state (slipway incidents),
// which look at recent runs rather than query one criterion.
func (s *SQLite) Latest(ctx context.Context, limit int) ([]*runmanifest.Manifest, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT run_id, manifest FROM runs ORDER BY id DESC LIMIT ?`, latestLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("runs: latest: %w", err)
	}
	defer rows.Close()
	return latest(rows.Next, rows.Scan, rows.Err)
}

// Latest is SQLite's Latest over the replicas' shared database: the
// newest runs of every runtime writing to it.
func (s *Postgres) Latest(ctx context.Context, limit int) ([]*runmanifest.Manifest, error) {
	rows, err := s.pool.Query(ctx, `SELECT run_id, manifest FROM slipway_runs.runs ORDER BY id DESC LIMIT $1`, latestLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("runs: latest: %w", err)
	}
	defer rows.Close()
	return latest(rows.Next, func(dest ...any) error { return rows.Scan(dest...) }, rows.Err)
}

func latestLimit(limit int) int {
	if limit <= 0 || limit > 10000 {
		return 1000
	}
	return limit
}

// latest reads the rows (run_id, manifest) of a Latest query.
func latest(next func() bool, scan func(...any) error, rowsErr func() error) ([]*runmanifest.Manifest, error) {
	var out []*runmanifest.Manifest
	for next() {
		var id string
		var doc []byte
		if err := scan(&id, &doc); err != nil {
			return nil, fmt.Errorf("runs: latest: %w", err)
		}
		m, err := stored(id, doc, nil, false)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if err := rowsErr(); err != nil {
		return nil, fmt.Errorf("runs: latest: %w", err)
	}
	return out, nil
}
