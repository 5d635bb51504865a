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
	if limit <= 0 || limit > 10000 {
		limit = 1000
	}
	rows, err := s.r.QueryContext(ctx, `SELECT run_id, manifest FROM runs ORDER BY id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("runs: latest: %w", err)
	}
	defer rows.Close()
	var out []*runmanifest.Manifest
	for rows.Next() {
		var id string
		var doc []byte
		if err := rows.Scan(&id, &doc); err != nil {
			return nil, fmt.Errorf("runs: latest: %w", err)
		}
		m, err := stored(id, doc, nil, false)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
