package cost

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// Schema is the PostgreSQL schema (namespace) of the ledger, beside the
// run store's slipway_runs and the cleanup records' slipway_cleanup in one
// database.
const Schema = "slipway_cost"

// pgSchema is the ledger's tables in PostgreSQL's types: times are
// nanoseconds since 1970 as in SQLite. Unlike the file, several writers
// share them (the runtime replicas of one cluster): each open interval
// names the writer that keeps it (writer), and writers holds each
// writer's own alive mark in place of the file's one row.
var pgSchema = []string{
	`CREATE SCHEMA IF NOT EXISTS ` + Schema,
	`CREATE TABLE ` + Schema + `.cost_schema (version integer NOT NULL)`,
	`CREATE TABLE ` + Schema + `.intervals (
		id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		pool        text COLLATE "C" NOT NULL,
		generation  text COLLATE "C" NOT NULL,
		sandbox_id  text COLLATE "C" NOT NULL,
		state       text COLLATE "C" NOT NULL,
		run_id      text COLLATE "C" NOT NULL DEFAULT '',
		start_ns    bigint NOT NULL,
		end_ns      bigint,
		end_unknown integer NOT NULL DEFAULT 0,
		end_max_ns  bigint,
		writer      text COLLATE "C" NOT NULL
	)`,
	`CREATE INDEX intervals_open ON ` + Schema + `.intervals (sandbox_id) WHERE end_ns IS NULL`,
	`CREATE INDEX intervals_open_by_writer ON ` + Schema + `.intervals (writer) WHERE end_ns IS NULL`,
	`CREATE INDEX intervals_by_pool ON ` + Schema + `.intervals (pool, start_ns)`,
	`CREATE INDEX intervals_by_sandbox ON ` + Schema + `.intervals (sandbox_id, start_ns)`,
	`CREATE INDEX intervals_by_run ON ` + Schema + `.intervals (run_id) WHERE run_id != ''`,
	`CREATE TABLE ` + Schema + `.storage_samples (
		pool       text COLLATE "C" NOT NULL,
		generation text COLLATE "C" NOT NULL,
		sandbox_id text COLLATE "C" NOT NULL,
		at_ns      bigint NOT NULL,
		period_ns  bigint NOT NULL,
		bytes      bigint NOT NULL
	)`,
	`CREATE INDEX storage_by_pool ON ` + Schema + `.storage_samples (pool, at_ns)`,
	`CREATE INDEX storage_by_sandbox ON ` + Schema + `.storage_samples (sandbox_id, at_ns)`,
	// writers: each writer (a replica's one opening of the ledger), when it
	// started and the last time it was known alive
	`CREATE TABLE ` + Schema + `.writers (
		writer     text COLLATE "C" PRIMARY KEY,
		started_ns bigint NOT NULL,
		alive_ns   bigint NOT NULL
	)`,
	`CREATE TABLE ` + Schema + `.starts (at_ns bigint NOT NULL, recovered bigint NOT NULL, writer text COLLATE "C" NOT NULL)`,
	`CREATE TABLE ` + Schema + `.gaps (at_ns bigint NOT NULL, events bigint NOT NULL, writer text COLLATE "C" NOT NULL)`,
}

// pgLock is the advisory lock class of the ledger: key 0 while replicas
// that open one new database at once create its schema once, key 1 for
// each write transaction.
const pgLock = 0xc057

// openPostgres connects to dsn's database with the ledger's schema first
// on the search path; where is what errors name (never the password).
func openPostgres(dsn string) (db *sql.DB, where string, err error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, "", fmt.Errorf("%w: cost: postgres connection string: %w", ErrInvalid, err) // pgx redacts the password
	}
	where = cfg.Host + ":" + strconv.Itoa(int(cfg.Port)) + "/" + cfg.Database
	cfg.RuntimeParams["search_path"] = Schema
	return stdlib.OpenDB(*cfg), where, nil
}

// OpenLedgerPostgres opens (creating its schema, Schema, if needed) the
// ledger in the PostgreSQL database dsn names, for writing beside the
// other writers of that database: the replicas of a runtime on one
// cluster. Each is a writer of its own (Writer), with its own alive mark;
// it closes at start, and every AliveEvery after, only the open intervals
// of writers whose mark is older than DeadAfter (they were killed), as
// ending at an unknown time between that mark and now. An interval of a
// live writer stays open: it is that writer's to end. Observe takes an
// interval over: a replica that takes over the cluster's sampling carries
// on the rows of the last, reopening what the cluster says never ended.
func OpenLedgerPostgres(ctx context.Context, dsn string, opts ...Option) (*Ledger, error) {
	db, where, err := openPostgres(dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2) // the writer, and LeaveAll or a reader meanwhile
	l := newLedger(db, where, true, opts)
	if l.writer == "" {
		host, _ := os.Hostname()
		l.writer = host + "@" + l.opened.UTC().Format(time.RFC3339Nano)
	}
	if err := migratePostgres(ctx, db, where); err != nil {
		db.Close()
		return nil, err
	}
	return l.start(ctx)
}

func migratePostgres(ctx context.Context, db *sql.DB, where string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("cost: open %s: %w", where, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, pgLock); err != nil {
		return fmt.Errorf("cost: open %s: %w", where, err)
	}
	v, err := pgVersion(ctx, tx)
	switch {
	case err != nil:
		return fmt.Errorf("cost: open %s: schema version: %w", where, err)
	case v == SchemaVersion:
		return nil
	case v != 0:
		return fmt.Errorf("%w: %s has ledger schema version %d, this build knows %d", ErrInvalid, where, v, SchemaVersion)
	}
	for _, stmt := range pgSchema {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("cost: create the ledger in %s: %w", where, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+Schema+`.cost_schema (version) VALUES ($1)`, SchemaVersion); err != nil {
		return fmt.Errorf("cost: create the ledger in %s: %w", where, err)
	}
	return tx.Commit()
}

// pgVersion is the ledger's schema version in the database, 0 when it
// has none.
func pgVersion(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (int, error) {
	var exists bool
	if err := q.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, Schema+".cost_schema").Scan(&exists); err != nil || !exists {
		return 0, err
	}
	var v int
	err := q.QueryRowContext(ctx, `SELECT version FROM `+Schema+`.cost_schema`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// lock serialises the writers' transactions in PostgreSQL: each statement
// then sees what every other writer committed before, so two replicas
// recording one sandbox at once never leave two open intervals of it.
func (l *Ledger) lock(ctx context.Context, tx *sql.Tx) error {
	if !l.pg {
		return nil // SQLite: one writer, and _txlock=immediate
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, 1)`, pgLock)
	return err
}

// recoverDead closes, in PostgreSQL, the open intervals of the writers
// other than l whose alive mark is older than l.deadAfter (or who have
// none), as ending at an unknown time between that mark (never before
// their start) and now; at start it also records the start and l's first
// alive mark. It returns how many it closed.
func (l *Ledger) recoverDead(ctx context.Context, starting bool) (int, error) {
	tx, err := l.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("cost: recover %s: %w", l.path, err)
	}
	defer tx.Rollback()
	if err := l.lock(ctx, tx); err != nil {
		return 0, fmt.Errorf("cost: recover %s: %w", l.path, err)
	}
	now := l.now().UnixNano()
	res, err := tx.ExecContext(ctx, `UPDATE intervals i
		SET end_ns = least(greatest(i.start_ns, coalesce(d.alive_ns, i.start_ns)), $2), end_unknown = 1, end_max_ns = greatest(i.start_ns, $2)
		FROM (SELECT DISTINCT o.writer, w.alive_ns FROM intervals o LEFT JOIN writers w ON w.writer = o.writer
			WHERE o.end_ns IS NULL AND o.writer <> $1 AND (w.alive_ns IS NULL OR w.alive_ns < $3)) d
		WHERE i.end_ns IS NULL AND i.writer = d.writer`, l.writer, now, now-int64(l.deadAfter))
	if err != nil {
		return 0, fmt.Errorf("cost: recover %s: %w", l.path, err)
	}
	n, _ := res.RowsAffected()
	if starting {
		if _, err := tx.ExecContext(ctx, `INSERT INTO starts (at_ns, recovered, writer) VALUES ($1, $2, $3)`, now, n, l.writer); err != nil {
			return 0, fmt.Errorf("cost: recover %s: %w", l.path, err)
		}
		if err := l.markAlive(ctx, tx, now); err != nil {
			return 0, fmt.Errorf("cost: recover %s: %w", l.path, err)
		}
	} else if n == 0 {
		return 0, nil // nothing to commit
	}
	return int(n), tx.Commit()
}

// OpenPostgres opens the ledger in the PostgreSQL database dsn names for
// reading; ErrNotFound when the database holds none (a runtime started
// with --db on the Kubernetes backend writes it).
func OpenPostgres(ctx context.Context, dsn string) (*Records, error) {
	db, where, err := openPostgres(dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2)
	v, err := pgVersion(ctx, db)
	switch {
	case err != nil:
		db.Close()
		return nil, fmt.Errorf("cost: open %s: %w", where, err)
	case v == 0:
		db.Close()
		return nil, fmt.Errorf("%w: no cost ledger in %s (a runtime with --db on the Kubernetes backend writes it in schema %s)", ErrNotFound, where, Schema)
	case v != SchemaVersion:
		db.Close()
		return nil, fmt.Errorf("%w: %s has ledger schema version %d, this build knows %d", ErrInvalid, where, v, SchemaVersion)
	}
	return &Records{db: db, path: where, pg: true}, nil
}

// Records is a reader of what l committed, once the events queued before
// the call are (Flush); close it after. In PostgreSQL it shares l's
// connections.
func (l *Ledger) Records(ctx context.Context) (*Records, error) {
	if err := l.Flush(ctx); err != nil {
		return nil, err
	}
	if l.pg {
		return &Records{db: l.w, path: l.path, pg: true, shared: true}, nil
	}
	return Open(ctx, l.path)
}
