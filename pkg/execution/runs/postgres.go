package runs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// PostgresSchemaVersion is the version of the PostgreSQL schema this build
// writes. A database with a higher version is refused (ErrSchema); one with
// a lower version is migrated when it is opened (pgMigrations).
const PostgresSchemaVersion = 5

// PostgresSchema is the PostgreSQL schema (namespace) the store's tables
// live in, so that one database can hold other Slipway tables (the control
// plane's, River's) beside them.
const PostgresSchema = "slipway_runs"

// pgSchema is the current version, in schema slipway_runs: the same tables
// as SQLite's (see schema), with the manifest as jsonb and every identity
// in the "C" collation (compared and sorted byte by byte, as Go sorts).
var pgSchema = []string{
	`CREATE SCHEMA IF NOT EXISTS ` + PostgresSchema,
	`CREATE TABLE slipway_runs.schema_version (version integer NOT NULL)`,
	`CREATE TABLE slipway_runs.runs (
		id                    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		run_id                text COLLATE "C" NOT NULL UNIQUE,
		status                text COLLATE "C" NOT NULL,
		workspace_template_id text COLLATE "C" NOT NULL,
		runner_image_digest   text COLLATE "C" NOT NULL,
		runner_binary_sha256  text COLLATE "C" NOT NULL,
		node_image_id         text COLLATE "C" NOT NULL,
		policy_revision       text COLLATE "C" NOT NULL,
		secret_version        text COLLATE "C" NOT NULL,
		generation            text COLLATE "C" NOT NULL,
		manifest              jsonb NOT NULL,
		request_key           text COLLATE "C" NOT NULL DEFAULT ''
	)`,
	`CREATE INDEX runs_by_template ON slipway_runs.runs (workspace_template_id, run_id)`,
	`CREATE INDEX runs_by_runner_image ON slipway_runs.runs (runner_image_digest, run_id)`,
	`CREATE INDEX runs_by_runner_binary ON slipway_runs.runs (runner_binary_sha256, run_id)`,
	`CREATE INDEX runs_by_node_image ON slipway_runs.runs (node_image_id, run_id)`,
	`CREATE INDEX runs_by_policy ON slipway_runs.runs (policy_revision, run_id)`,
	`CREATE INDEX runs_by_secret_version ON slipway_runs.runs (secret_version, run_id)`,
	`CREATE INDEX runs_by_generation ON slipway_runs.runs (generation, run_id)`,
	`CREATE INDEX runs_by_request_key ON slipway_runs.runs (request_key, run_id)`,
	`CREATE INDEX runs_open ON slipway_runs.runs (run_id) WHERE ` + openWhere,
	`CREATE INDEX runs_by_node ON slipway_runs.runs ((manifest->>'node_id'), run_id)`,
	`CREATE INDEX runs_by_runtime_class ON slipway_runs.runs ((manifest->>'runtime_class'), run_id)`,
	`CREATE INDEX runs_by_control_plane ON slipway_runs.runs ((manifest->>'control_plane_digest'), run_id)`,
	`CREATE TABLE slipway_runs.templates (
		template_id     text COLLATE "C" PRIMARY KEY,
		packages_sha256 text NOT NULL,
		package_count   integer NOT NULL
	)`,
	`CREATE TABLE slipway_runs.template_packages (
		template_id text COLLATE "C" NOT NULL,
		name        text COLLATE "C" NOT NULL,
		version     text COLLATE "C" NOT NULL,
		PRIMARY KEY (template_id, name, version)
	)`,
	`CREATE INDEX template_packages_by_package ON slipway_runs.template_packages (name, version, template_id)`,
	pgArtifactProvenance,
}

// pgArtifactProvenance is SQLite's artifact_provenance, the builders as jsonb.
const pgArtifactProvenance = `CREATE TABLE slipway_runs.artifact_provenance (
		artifact_id text COLLATE "C" PRIMARY KEY,
		builders    jsonb NOT NULL
	)`

// pgMigrations[v] takes a database from schema version v+1 to v+2, in the
// transaction that opens it. Version 2 records the claim request's key
// (request_key, "" for the runs before it); version 3 indexes the node and
// the runtime class of the manifest; version 4 its control plane's digest
// (a package query reaches runs by their control plane's packages);
// version 5 the builders of artifacts (artifact_provenance), the rows
// stored before kept as they are.
var pgMigrations = [][]string{
	{
		`ALTER TABLE slipway_runs.runs ADD COLUMN request_key text COLLATE "C" NOT NULL DEFAULT ''`,
		`CREATE INDEX runs_by_request_key ON slipway_runs.runs (request_key, run_id)`,
	},
	{
		`CREATE INDEX runs_by_node ON slipway_runs.runs ((manifest->>'node_id'), run_id)`,
		`CREATE INDEX runs_by_runtime_class ON slipway_runs.runs ((manifest->>'runtime_class'), run_id)`,
	},
	{
		`CREATE INDEX runs_by_control_plane ON slipway_runs.runs ((manifest->>'control_plane_digest'), run_id)`,
	},
	{pgArtifactProvenance},
}

// Advisory lock keys (pg_advisory_xact_lock(class, key)): class pgLockClass
// with key 0 serialises opening the schema; with the hash of a template id,
// recording that template's packages.
const pgLockClass = 0x52554e53 // "RUNS"

// Postgres is a Store in a PostgreSQL database (pgx), for many runtimes
// sharing one manifest store: every handle on the database sees every run,
// and queries span them all.
//
// Each Create, Update and RecordPackages is one transaction, durable once
// it returns (the server's synchronous_commit). Concurrent Updates of one
// run queue on its row lock (SELECT ... FOR UPDATE), from any handle in any
// process; Creates of one run id race on its unique index, and exactly one
// wins.
type Postgres struct {
	pool  *pgxpool.Pool
	where string // host:port/database, for messages (never the password)
}

var _ Store = (*Postgres)(nil)

// OpenPostgres opens the store in the PostgreSQL database at dsn
// (postgres://user@host:port/db?..., or a key=value connection string),
// creating schema slipway_runs and its tables if needed.
func OpenPostgres(ctx context.Context, dsn string) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors redact the password
		return nil, fmt.Errorf("%w: postgres connection string: %w", ErrInvalid, err)
	}
	where := cfg.ConnConfig.Host + ":" + strconv.Itoa(int(cfg.ConnConfig.Port)) + "/" + cfg.ConnConfig.Database
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("runs: open postgres %s: %w", where, err)
	}
	s := &Postgres{pool: pool, where: where}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// migrate creates the schema in a new database and checks the version of
// an existing one, under an advisory lock: handles opening the same new
// database at once create it once.
func (s *Postgres) migrate(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, pgLockClass); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass('slipway_runs.schema_version') IS NOT NULL`).Scan(&exists); err != nil {
			return err
		}
		if exists {
			var v int
			if err := tx.QueryRow(ctx, `SELECT version FROM slipway_runs.schema_version`).Scan(&v); err != nil {
				return fmt.Errorf("schema version: %w", err)
			}
			if v > PostgresSchemaVersion || v < 1 {
				return fmt.Errorf("%w: schema version %d, this build knows 1 to %d", ErrSchema, v, PostgresSchemaVersion)
			}
			for ; v < PostgresSchemaVersion; v++ {
				for _, stmt := range pgMigrations[v-1] {
					if _, err := tx.Exec(ctx, stmt); err != nil {
						return fmt.Errorf("migrate from schema version %d to %d: %w", v, v+1, err)
					}
				}
				if _, err := tx.Exec(ctx, `UPDATE slipway_runs.schema_version SET version = $1`, v+1); err != nil {
					return fmt.Errorf("migrate to schema version %d: %w", v+1, err)
				}
			}
			return nil
		}
		for _, stmt := range pgSchema {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("create schema: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO slipway_runs.schema_version (version) VALUES ($1)`, PostgresSchemaVersion); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("runs: open postgres %s: %w", s.where, err)
	}
	return nil
}

// Where is host:port/database of the store.
func (s *Postgres) Where() string { return s.where }

// Close closes the connections.
func (s *Postgres) Close() error {
	s.pool.Close()
	return nil
}

// pgInsert stores a new run; a run id stored before is left alone.
var pgInsert = `INSERT INTO slipway_runs.runs (run_id, status, ` + strings.Join(queryColumns, ", ") + `, manifest)
	VALUES ($1, $2, ` + placeholders(3, len(queryColumns)) + `, $` + strconv.Itoa(3+len(queryColumns)) + `)
	ON CONFLICT (run_id) DO NOTHING`

func placeholders(from, n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = "$" + strconv.Itoa(from+i)
	}
	return strings.Join(ps, ", ")
}

// Create implements Store.
func (s *Postgres) Create(ctx context.Context, m *runmanifest.Manifest) error {
	p, err := pendingOf(m)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, pgInsert, p.args...)
	if err != nil {
		return fmt.Errorf("runs: create %s: %w", p.runID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %s", ErrExists, p.runID)
	}
	return nil
}

// Update implements Store.
func (s *Postgres) Update(ctx context.Context, runID string, fn func(*runmanifest.Manifest) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("runs: update %s: %w", runmanifest.SafeID(runID), err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var id int64
	var doc []byte
	err = tx.QueryRow(ctx, `SELECT id, manifest FROM slipway_runs.runs WHERE run_id = $1 FOR UPDATE`, runID).Scan(&id, &doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %s", ErrNotFound, runmanifest.SafeID(runID))
	}
	if err != nil {
		return fmt.Errorf("runs: update %s: %w", runmanifest.SafeID(runID), err)
	}
	m, err := runmanifest.DecodeManifest(doc)
	if err != nil {
		return fmt.Errorf("runs: update %s: stored manifest: %w", runmanifest.SafeID(runID), err)
	}
	if m.Status.Final() {
		return fmt.Errorf("%w: %s is %s", ErrCompleted, runmanifest.SafeID(runID), m.Status)
	}
	// jsonb keeps its own key order: compare encodings made here
	before, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("runs: update %s: %w", runID, err)
	}
	oldColumns, next, err := change(runID, m, fn)
	if err != nil {
		return err
	}
	if string(next) == string(before) {
		return nil
	}
	set := []string{"status = $1", "manifest = $2"}
	args := []any{string(m.Status), string(next)}
	for i, v := range manifestColumns(m) {
		if v != oldColumns[i] {
			args = append(args, v)
			set = append(set, queryColumns[i]+" = $"+strconv.Itoa(len(args)))
		}
	}
	args = append(args, id)
	if _, err := tx.Exec(ctx, `UPDATE slipway_runs.runs SET `+strings.Join(set, ", ")+` WHERE id = $`+strconv.Itoa(len(args)), args...); err != nil {
		return fmt.Errorf("runs: update %s: %w", runID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("runs: update %s: commit: %w", runID, err)
	}
	return nil
}

// Get implements Store.
func (s *Postgres) Get(ctx context.Context, runID string) (*runmanifest.Manifest, error) {
	var doc []byte
	err := s.pool.QueryRow(ctx, `SELECT manifest FROM slipway_runs.runs WHERE run_id = $1`, runID).Scan(&doc)
	return stored(runID, doc, err, errors.Is(err, pgx.ErrNoRows))
}

// Query implements Store. A package query goes from the package index to
// the templates holding the package and to their runs; the ids are sorted
// by the database (byte order, as Go sorts) and the limit applied there.
func (s *Postgres) Query(ctx context.Context, q runmanifest.Query) ([]string, error) {
	stmt, args, err := postgresQuery(q)
	if err != nil {
		return nil, err
	}
	return s.ids(ctx, "query", stmt, args...)
}

func postgresQuery(q runmanifest.Query) (string, []any, error) {
	if err := checkQuery(q); err != nil {
		return "", nil, err
	}
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	from := "slipway_runs.runs r"
	if q.Package != "" {
		p, err := runmanifest.ParsePackage(q.Package)
		if err != nil {
			return "", nil, err
		}
		// The artifacts holding the package, then the runs made of any of
		// them (an index per artifact column; DISTINCT: a run whose
		// template and runner both hold it is listed once).
		on := make([]string, len(packageArtifacts))
		for i, a := range packageArtifacts {
			on[i] = a.postgres + " = a.template_id"
		}
		from = "(SELECT DISTINCT p.template_id FROM slipway_runs.template_packages p WHERE p.name = " + arg(p.Name) + " AND p.version = " + arg(p.Version) +
			") a JOIN slipway_runs.runs r ON (" + strings.Join(on, " OR ") + ")"
		where = append(where, "TRUE")
	}
	for i, v := range queryColumnValues(q) {
		if v != "" {
			where = append(where, "r."+queryColumns[i]+" = "+arg(v))
		}
	}
	for _, c := range manifestCriteria(q) {
		if c[1] != "" {
			where = append(where, "(r.manifest->>'"+c[0]+"') = "+arg(c[1]))
		}
	}
	if q.RunIDPrefix != "" {
		where = append(where, "left(r.run_id, "+arg(len(q.RunIDPrefix))+") = "+arg(q.RunIDPrefix))
	}
	sel := "SELECT r.run_id FROM "
	if q.Package != "" {
		sel = "SELECT DISTINCT r.run_id FROM "
	}
	stmt := sel + from + " WHERE " + strings.Join(where, " AND ") + " ORDER BY r.run_id"
	if q.Limit > 0 {
		stmt += " LIMIT " + arg(q.Limit)
	}
	return stmt, args, nil
}

// Open implements Store. It reads the partial index runs_open.
func (s *Postgres) Open(ctx context.Context) ([]string, error) {
	return s.ids(ctx, "open runs", `SELECT run_id FROM slipway_runs.runs WHERE `+openWhere+` ORDER BY run_id`)
}

// ids runs a query of run ids; none is nil.
func (s *Postgres) ids(ctx context.Context, what, stmt string, args ...any) ([]string, error) {
	rows, err := s.pool.Query(ctx, stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("runs: %s: %w", what, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("runs: %s: %w", what, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return ids, nil
}

// RecordPackages implements Store. Recordings of one template queue on an
// advisory lock of the template, from any handle.
func (s *Postgres) RecordPackages(ctx context.Context, templateID string, pkgs []runmanifest.Package) (runmanifest.Change, error) {
	set, sum, err := packageSet(templateID, pkgs)
	if err != nil {
		return "", err
	}
	names, versions := make([]string, len(set)), make([]string, len(set))
	for i, p := range set {
		names[i], versions[i] = p.Name, p.Version
	}
	change := runmanifest.Created
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, pgLockClass, templateID); err != nil {
			return err
		}
		var old string
		switch err := tx.QueryRow(ctx, `SELECT packages_sha256 FROM slipway_runs.templates WHERE template_id = $1`, templateID).Scan(&old); {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		case old == sum:
			change = runmanifest.Unchanged
			return nil
		default:
			change = runmanifest.Updated
			if _, err := tx.Exec(ctx, `DELETE FROM slipway_runs.template_packages WHERE template_id = $1`, templateID); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO slipway_runs.template_packages (template_id, name, version)
			SELECT $1, n, v FROM unnest($2::text[], $3::text[]) AS p (n, v)`, templateID, names, versions); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO slipway_runs.templates (template_id, packages_sha256, package_count) VALUES ($1, $2, $3)
			ON CONFLICT (template_id) DO UPDATE SET packages_sha256 = excluded.packages_sha256, package_count = excluded.package_count`,
			templateID, sum, len(set))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("runs: record packages of %s: %w", templateID, err)
	}
	return change, nil
}

// Packages implements Store.
func (s *Postgres) Packages(ctx context.Context, templateID string) ([]runmanifest.Package, bool, error) {
	if err := runmanifest.CheckID(templateID); err != nil {
		return nil, false, fmt.Errorf("%w: packages: template id: %s", ErrInvalid, err)
	}
	var out []runmanifest.Package
	recorded := false
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var n int
		switch err := tx.QueryRow(ctx, `SELECT package_count FROM slipway_runs.templates WHERE template_id = $1`, templateID).Scan(&n); {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		recorded = true
		rows, err := tx.Query(ctx, `SELECT name, version FROM slipway_runs.template_packages WHERE template_id = $1 ORDER BY name COLLATE "C", version COLLATE "C"`, templateID)
		if err != nil {
			return err
		}
		out = make([]runmanifest.Package, 0, n)
		var p runmanifest.Package
		_, err = pgx.ForEachRow(rows, []any{&p.Name, &p.Version}, func() error {
			out = append(out, p)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("runs: packages of %s: %w", templateID, err)
	}
	return out, recorded, nil
}

// packageSet checks a template's packages and returns them sorted without
// duplicates, with the sha256 of the set.
func packageSet(templateID string, pkgs []runmanifest.Package) ([]runmanifest.Package, string, error) {
	if templateID == "" {
		return nil, "", fmt.Errorf("%w: template id: required", ErrInvalid)
	}
	if err := runmanifest.CheckID(templateID); err != nil {
		return nil, "", fmt.Errorf("%w: template id: %s", ErrInvalid, err)
	}
	set := slices.Clone(pkgs)
	for _, p := range set {
		if err := p.Validate(); err != nil {
			return nil, "", fmt.Errorf("template %s: %w", templateID, err)
		}
	}
	slices.SortFunc(set, cmpPackage)
	set = slices.Compact(set)
	h := sha256.New()
	for _, p := range set {
		fmt.Fprintf(h, "%s\x00%s\n", p.Name, p.Version)
	}
	return set, hex.EncodeToString(h.Sum(nil)), nil
}
