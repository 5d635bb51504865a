package reconcile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the pure-Go driver named "sqlite"

	"github.com/slipway-dev/slipway/internal/sqlarg"
)

// RecordsFile is the reconciler's records in a runtime's state directory,
// beside runs.db (a sibling file: the run store's schema stays its own).
const RecordsFile = "cleanup.db"

// States of a cleanup record.
const (
	// StatePending: a candidate seen, waiting out its grace (a running
	// sandbox whose owner may yet be recorded); nothing done yet.
	StatePending = "pending"
	// StateUnknown: an action failed or timed out; tracked with an owner,
	// a deadline, its attempts and last error, retried each pass.
	StateUnknown = "unknown"
	// StateDone: the action succeeded on its first attempt.
	StateDone = "done"
	// StateResolved: the action succeeded after it had been unknown.
	StateResolved = "resolved"
	// StateKept: the fence kept the resource (re-claimed or adopted
	// between the read and the act), or it stopped being a candidate.
	StateKept = "kept"
)

// Record is one cleanup record: what the reconciler found, what it did,
// and how that went. Errors are the backend's messages (ids and paths,
// never a credential: credentials are named by fingerprint).
type Record struct {
	ID       int64  `json:"id"`
	Kind     string `json:"kind"`
	Resource string `json:"resource"`
	Pool     string `json:"pool,omitempty"`
	RunID    string `json:"runId,omitempty"`
	// LeaseVersion is the lease as the pass read it: the owner and the
	// run's allocation attempt ("r-1@2"), "warm@<generation>", ...
	LeaseVersion string    `json:"leaseVersion,omitempty"`
	Action       string    `json:"action"`
	State        string    `json:"state"`
	Outcome      string    `json:"outcome,omitempty"`
	LastError    string    `json:"lastError,omitempty"`
	Owner        string    `json:"owner"`
	Deadline     time.Time `json:"deadline,omitzero"`
	Attempts     int       `json:"attempts"`
	First        time.Time `json:"first"`
	Updated      time.Time `json:"updated"`
}

// Open reports whether the record still needs work.
func (r Record) Open() bool { return r.State == StatePending || r.State == StateUnknown }

// Records is the durable table of cleanup records: in one SQLite file
// (WAL, synchronous=FULL) beside a runtime's run store, or in PostgreSQL
// (OpenRecordsPostgres) where runtime replicas share one database and the
// reconciler that holds the Lease carries on the records another left.
// Written by one reconciler at a time, readable by any process meanwhile.
type Records struct {
	db   *sql.DB
	path string // what an error names: the file, or host:port/database
	pg   bool   // PostgreSQL: placeholders are $n
}

// q is query in the store's placeholders.
func (s *Records) q(query string) string {
	if !s.pg {
		return query
	}
	return sqlarg.Dollar(query)
}

var recordsSchema = []string{
	`CREATE TABLE IF NOT EXISTS cleanup (
		id            INTEGER PRIMARY KEY,
		kind          TEXT NOT NULL,
		resource      TEXT NOT NULL,
		pool          TEXT NOT NULL DEFAULT '',
		run_id        TEXT NOT NULL DEFAULT '',
		lease_version TEXT NOT NULL DEFAULT '',
		action        TEXT NOT NULL,
		state         TEXT NOT NULL,
		outcome       TEXT NOT NULL DEFAULT '',
		last_error    TEXT NOT NULL DEFAULT '',
		owner         TEXT NOT NULL,
		deadline      INTEGER NOT NULL DEFAULT 0,
		attempts      INTEGER NOT NULL DEFAULT 0,
		first_at      INTEGER NOT NULL,
		updated_at    INTEGER NOT NULL
	)`,
	// at most one open record per resource and kind
	`CREATE UNIQUE INDEX IF NOT EXISTS cleanup_open ON cleanup (kind, resource) WHERE state IN ('pending', 'unknown')`,
	`CREATE INDEX IF NOT EXISTS cleanup_by_state ON cleanup (state, updated_at)`,
}

// OpenRecords opens (creating it if needed) the records file at path.
func OpenRecords(ctx context.Context, path string) (*Records, error) {
	if path == "" || strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("reconcile: records path %q: want a file path without '?'", path)
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_journal_mode=WAL&_synchronous=FULL&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("reconcile: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	for _, q := range recordsSchema {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			return nil, fmt.Errorf("reconcile: open %s: %w", path, err)
		}
	}
	return &Records{db: db, path: path}, nil
}

// ReadRecords opens the records file at path for reading only (the
// operator's view, beside a running reconciler). A missing file is
// os.ErrNotExist: no reconciler has run on that state directory.
func ReadRecords(ctx context.Context, path string) (*Records, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("reconcile: %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_query_only=1")
	if err != nil {
		return nil, fmt.Errorf("reconcile: open %s: %w", path, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("reconcile: open %s: %w", path, err)
	}
	return &Records{db: db, path: path}, nil
}

// Close closes the file.
func (s *Records) Close() error { return s.db.Close() }

// entry is one write: a record's new state. attempted says an action was
// tried (attempts goes up by one).
type entry struct {
	Record
	attempted bool
}

// write stores es in one transaction: each updates the open record of its
// kind and resource when there is one (an unknown record that succeeds
// becomes resolved; attempts add up; the first time stays), else it is a
// new record.
func (s *Records) write(ctx context.Context, es []entry) error {
	if len(es) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("reconcile: records: %w", err)
	}
	defer tx.Rollback()
	for _, e := range es {
		var (
			id       int64
			state    string
			attempts int
		)
		err := tx.QueryRowContext(ctx, s.q(`SELECT id, state, attempts FROM cleanup WHERE kind = ? AND resource = ? AND state IN ('pending', 'unknown')`),
			e.Kind, e.Resource).Scan(&id, &state, &attempts)
		n := 0
		if e.attempted {
			n = 1
		}
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if e.State == StateKept && !e.attempted && e.Outcome == "" {
				continue // a candidate that never was one: nothing to record
			}
			_, err = tx.ExecContext(ctx, s.q(`INSERT INTO cleanup (kind, resource, pool, run_id, lease_version, action, state, outcome, last_error, owner, deadline, attempts, first_at, updated_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
				e.Kind, e.Resource, e.Pool, e.RunID, e.LeaseVersion, e.Action, e.State, e.Outcome, e.LastError, e.Owner,
				unixNano(e.Deadline), n, e.Updated.UnixNano(), e.Updated.UnixNano())
		case err != nil:
		default:
			next := e.State
			if state == StateUnknown && e.State == StateDone {
				next = StateResolved
			}
			deadline := unixNano(e.Deadline)
			if next != StateUnknown && next != StatePending {
				deadline = 0
			}
			_, err = tx.ExecContext(ctx, s.q(`UPDATE cleanup SET pool = ?, run_id = ?, lease_version = ?, action = ?, state = ?, outcome = ?,
				last_error = CASE WHEN CAST(? AS TEXT) = '' THEN last_error ELSE ? END, owner = ?,
				deadline = CASE WHEN CAST(? AS BIGINT) = 0 THEN 0 WHEN deadline = 0 THEN CAST(? AS BIGINT) ELSE deadline END,
				attempts = attempts + CAST(? AS BIGINT), updated_at = ? WHERE id = ?`),
				e.Pool, e.RunID, e.LeaseVersion, e.Action, next, e.Outcome, e.LastError, e.LastError, e.Owner,
				deadline, deadline, n, e.Updated.UnixNano(), id)
		}
		if err != nil {
			return fmt.Errorf("reconcile: records: %s %s: %w", e.Kind, e.Resource, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("reconcile: records: %w", err)
	}
	return nil
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

const recordColumns = `id, kind, resource, pool, run_id, lease_version, action, state, outcome, last_error, owner, deadline, attempts, first_at, updated_at`

// OpenRecords returns the records that still need work (unknown first,
// then pending), oldest first.
func (s *Records) Open(ctx context.Context) ([]Record, error) {
	return s.query(ctx, `SELECT `+recordColumns+` FROM cleanup WHERE state IN ('unknown', 'pending') ORDER BY state DESC, first_at, id`)
}

// Recent returns the last n records that are closed (done, resolved,
// kept), newest first.
func (s *Records) Recent(ctx context.Context, n int) ([]Record, error) {
	return s.query(ctx, s.q(`SELECT `+recordColumns+` FROM cleanup WHERE state NOT IN ('unknown', 'pending') ORDER BY updated_at DESC, id DESC LIMIT ?`), n)
}

// prune deletes the closed records last updated before before; open
// records are never pruned.
func (s *Records) prune(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM cleanup WHERE state NOT IN ('unknown', 'pending') AND updated_at < ?`), before.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("reconcile: records: prune: %w", err)
	}
	return res.RowsAffected()
}

// Unknown counts the unknown records by pool.
func (s *Records) Unknown(ctx context.Context) (map[string]int64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT pool, count(*) FROM cleanup WHERE state = 'unknown' GROUP BY pool`)
	if err != nil {
		return nil, fmt.Errorf("reconcile: records: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var pool string
		var n int64
		if err := rows.Scan(&pool, &n); err != nil {
			return nil, fmt.Errorf("reconcile: records: %w", err)
		}
		out[pool] = n
	}
	return out, rows.Err()
}

func (s *Records) query(ctx context.Context, q string, args ...any) ([]Record, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reconcile: records %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var r Record
		var deadline, first, updated int64
		if err := rows.Scan(&r.ID, &r.Kind, &r.Resource, &r.Pool, &r.RunID, &r.LeaseVersion, &r.Action, &r.State, &r.Outcome,
			&r.LastError, &r.Owner, &deadline, &r.Attempts, &first, &updated); err != nil {
			return nil, fmt.Errorf("reconcile: records %s: %w", s.path, err)
		}
		if deadline != 0 {
			r.Deadline = time.Unix(0, deadline).UTC()
		}
		r.First, r.Updated = time.Unix(0, first).UTC(), time.Unix(0, updated).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}
