package runs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// builderSet checks an artifact's builders and returns them sorted
// without repeats, with their stored encoding (a JSON array, "[]" for
// none).
func builderSet(artifactID string, bs []runmanifest.Builder) ([]runmanifest.Builder, []byte, error) {
	if artifactID == "" {
		return nil, nil, fmt.Errorf("%w: artifact id: required", ErrInvalid)
	}
	if err := runmanifest.CheckID(artifactID); err != nil {
		return nil, nil, fmt.Errorf("%w: artifact id: %s", ErrInvalid, err)
	}
	set := slices.Clone(bs)
	for _, b := range set {
		if err := b.Validate(); err != nil {
			return nil, nil, fmt.Errorf("artifact %s: %w", artifactID, err)
		}
	}
	set = runmanifest.SortBuilders(set)
	if set == nil {
		set = []runmanifest.Builder{}
	}
	doc, err := json.Marshal(set)
	if err != nil {
		return nil, nil, fmt.Errorf("runs: record builders of %s: %w", artifactID, err)
	}
	return set, doc, nil
}

// decodeBuilders reads a stored set back.
func decodeBuilders(artifactID string, doc []byte) ([]runmanifest.Builder, error) {
	var out []runmanifest.Builder
	if err := json.Unmarshal(doc, &out); err != nil {
		return nil, fmt.Errorf("runs: builders of %s: stored set: %w", artifactID, err)
	}
	if out == nil {
		out = []runmanifest.Builder{}
	}
	return out, nil
}

// RecordBuilders implements Store.
func (s *SQLite) RecordBuilders(ctx context.Context, artifactID string, bs []runmanifest.Builder) (runmanifest.Change, error) {
	_, doc, err := builderSet(artifactID, bs)
	if err != nil {
		return "", err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("runs: record builders of %s: %w", artifactID, err)
	}
	defer tx.Rollback()
	change := runmanifest.Created
	var old string
	switch err := tx.QueryRowContext(ctx, `SELECT builders FROM artifact_provenance WHERE artifact_id = ?`, artifactID).Scan(&old); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return "", fmt.Errorf("runs: record builders of %s: %w", artifactID, err)
	case old == string(doc):
		return runmanifest.Unchanged, nil
	default:
		change = runmanifest.Updated
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO artifact_provenance (artifact_id, builders) VALUES (?, ?)
		ON CONFLICT (artifact_id) DO UPDATE SET builders = excluded.builders`, artifactID, string(doc)); err != nil {
		return "", fmt.Errorf("runs: record builders of %s: %w", artifactID, err)
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("runs: record builders of %s: commit: %w", artifactID, err)
	}
	return change, nil
}

// Builders implements Store.
func (s *SQLite) Builders(ctx context.Context, artifactID string) ([]runmanifest.Builder, bool, error) {
	if err := runmanifest.CheckID(artifactID); err != nil {
		return nil, false, fmt.Errorf("%w: builders: artifact id: %s", ErrInvalid, err)
	}
	var doc string
	switch err := s.r.QueryRowContext(ctx, `SELECT builders FROM artifact_provenance WHERE artifact_id = ?`, artifactID).Scan(&doc); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("runs: builders of %s: %w", artifactID, err)
	}
	out, err := decodeBuilders(artifactID, []byte(doc))
	return out, err == nil, err
}

// RecordBuilders implements Store. Recordings of one artifact queue on its
// row (the upsert), from any handle.
func (s *Postgres) RecordBuilders(ctx context.Context, artifactID string, bs []runmanifest.Builder) (runmanifest.Change, error) {
	set, doc, err := builderSet(artifactID, bs)
	if err != nil {
		return "", err
	}
	change := runmanifest.Created
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, pgLockClass, "builders "+artifactID); err != nil {
			return err
		}
		var old []byte
		switch err := tx.QueryRow(ctx, `SELECT builders FROM slipway_runs.artifact_provenance WHERE artifact_id = $1`, artifactID).Scan(&old); {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		default:
			prev, err := decodeBuilders(artifactID, old)
			if err != nil {
				return err
			}
			if slices.Equal(prev, set) {
				change = runmanifest.Unchanged
				return nil
			}
			change = runmanifest.Updated
		}
		_, err := tx.Exec(ctx, `INSERT INTO slipway_runs.artifact_provenance (artifact_id, builders) VALUES ($1, $2::jsonb)
			ON CONFLICT (artifact_id) DO UPDATE SET builders = excluded.builders`, artifactID, string(doc))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("runs: record builders of %s: %w", artifactID, err)
	}
	return change, nil
}

// Builders implements Store.
func (s *Postgres) Builders(ctx context.Context, artifactID string) ([]runmanifest.Builder, bool, error) {
	if err := runmanifest.CheckID(artifactID); err != nil {
		return nil, false, fmt.Errorf("%w: builders: artifact id: %s", ErrInvalid, err)
	}
	var doc []byte
	switch err := s.pool.QueryRow(ctx, `SELECT builders FROM slipway_runs.artifact_provenance WHERE artifact_id = $1`, artifactID).Scan(&doc); {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("runs: builders of %s: %w", artifactID, err)
	}
	out, err := decodeBuilders(artifactID, doc)
	return out, err == nil, err
}
