package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// RecordsSchema is the PostgreSQL schema (namespace) of the cleanup
// records, beside the run store's slipway_runs in one database.
const RecordsSchema = "slipway_cleanup"

// pgRecordsSchema is recordsSchema in PostgreSQL's types: times are
// nanoseconds since 1970 as in SQLite, identities compare byte by byte.
var pgRecordsSchema = []string{
	`CREATE SCHEMA IF NOT EXISTS ` + RecordsSchema,
	`CREATE TABLE IF NOT EXISTS ` + RecordsSchema + `.cleanup (
		id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		kind          text COLLATE "C" NOT NULL,
		resource      text COLLATE "C" NOT NULL,
		pool          text COLLATE "C" NOT NULL DEFAULT '',
		run_id        text COLLATE "C" NOT NULL DEFAULT '',
		lease_version text COLLATE "C" NOT NULL DEFAULT '',
		action        text COLLATE "C" NOT NULL,
		state         text COLLATE "C" NOT NULL,
		outcome       text NOT NULL DEFAULT '',
		last_error    text NOT NULL DEFAULT '',
		owner         text COLLATE "C" NOT NULL,
		deadline      bigint NOT NULL DEFAULT 0,
		attempts      bigint NOT NULL DEFAULT 0,
		first_at      bigint NOT NULL,
		updated_at    bigint NOT NULL
	)`,
	`CREATE UNIQUE INDEX IF NOT EXISTS cleanup_open ON ` + RecordsSchema + `.cleanup (kind, resource) WHERE state IN ('pending', 'unknown')`,
	`CREATE INDEX IF NOT EXISTS cleanup_by_state ON ` + RecordsSchema + `.cleanup (state, updated_at)`,
}

// pgRecordsLock is the advisory lock class under which replicas that open
// one new database at once create its schema once.
const pgRecordsLock = 0x5c1ea4

// OpenRecordsPostgres opens (creating its schema if needed) the cleanup
// records in the PostgreSQL database dsn names: the runtime replicas that
// share one run store share their reconciler's records, so a new leader
// carries on the unknown records of the last.
func OpenRecordsPostgres(ctx context.Context, dsn string) (*Records, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("reconcile: records: postgres connection string: %w", err) // pgx redacts the password
	}
	where := cfg.Host + ":" + strconv.Itoa(int(cfg.Port)) + "/" + cfg.Database
	cfg.RuntimeParams["search_path"] = RecordsSchema
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(4)
	if err := migrateRecords(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("reconcile: records %s: %w", where, err)
	}
	return &Records{db: db, path: where, pg: true}, nil
}

func migrateRecords(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, pgRecordsLock); err != nil {
		return err
	}
	for _, q := range pgRecordsSchema {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return tx.Commit()
}
