package runs

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"

	_ "modernc.org/sqlite" // the pure-Go driver named "sqlite"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// SchemaVersion is the version of the SQLite schema this build writes. A
// database with a higher version is refused (ErrSchema); one with a lower
// version is migrated when it is opened (migrations).
const SchemaVersion = 4

// schema is the current version. Manifests are stored whole, as their JSON
// (the record), beside copies of the fields queries select on. Each query
// index ends with run_id so that it covers the query: the ids come from
// the index alone, in order, without reading the manifests.
var schema = []string{
	`CREATE TABLE schema_version (version INTEGER NOT NULL)`,
	`CREATE TABLE runs (
		id                    INTEGER PRIMARY KEY,
		run_id                TEXT NOT NULL UNIQUE,
		status                TEXT NOT NULL,
		workspace_template_id TEXT NOT NULL,
		runner_image_digest   TEXT NOT NULL,
		node_image_id         TEXT NOT NULL,
		policy_revision       TEXT NOT NULL,
		generation            TEXT NOT NULL,
		manifest              TEXT NOT NULL,
		runner_binary_sha256  TEXT NOT NULL DEFAULT '',
		secret_version        TEXT NOT NULL DEFAULT '',
		request_key           TEXT NOT NULL DEFAULT ''
	)`,
	`CREATE INDEX runs_by_template ON runs (workspace_template_id, run_id)`,
	`CREATE INDEX runs_by_runner_image ON runs (runner_image_digest, run_id)`,
	`CREATE INDEX runs_by_node_image ON runs (node_image_id, run_id)`,
	`CREATE INDEX runs_by_policy ON runs (policy_revision, run_id)`,
	`CREATE INDEX runs_by_generation ON runs (generation, run_id)`,
	`CREATE INDEX runs_by_runner_binary ON runs (runner_binary_sha256, run_id)`,
	`CREATE INDEX runs_by_secret_version ON runs (secret_version, run_id)`,
	`CREATE INDEX runs_by_request_key ON runs (request_key, run_id)`,
	// templates whose package index was recorded, with a digest of the set
	// so that recording it again is a no-op
	`CREATE TABLE templates (
		template_id     TEXT PRIMARY KEY,
		packages_sha256 TEXT NOT NULL,
		package_count   INTEGER NOT NULL
	) WITHOUT ROWID`,
	`CREATE TABLE template_packages (
		template_id TEXT NOT NULL,
		name        TEXT NOT NULL,
		version     TEXT NOT NULL,
		PRIMARY KEY (template_id, name, version)
	) WITHOUT ROWID`,
	`CREATE INDEX template_packages_by_package ON template_packages (name, version, template_id)`,
	artifactProvenance,
}

// artifactProvenance holds the builders of each artifact whose provenance
// the runtime read (RecordBuilders): a JSON array of runmanifest.Builder,
// sorted, "[]" for an artifact without verified provenance.
const artifactProvenance = `CREATE TABLE artifact_provenance (
		artifact_id TEXT PRIMARY KEY,
		builders    TEXT NOT NULL
	) WITHOUT ROWID`

// migrations[v] takes a file from schema version v+1 to v+2, in the
// transaction that opens it.
//
// Version 2 names the runner's two identities apart: runner_digest (the
// runner IMAGE's digest) becomes runner_image_digest, and the runner
// BINARY's sha256 gets its own runner_binary_sha256; it also records the
// pinned secret_version and the verification_policy_revision. The stored
// manifests are rewritten to the new names (the old runs' binary sha256,
// secret version and verification revision were never recorded: "").
//
// Version 3 records the claim request's key (request_key, "" for the runs
// before it: their manifests leave the field out).
//
// Version 4 records the builders of artifacts (artifact_provenance), from
// their verified SLSA provenance; the runs and packages stored before are
// kept as they are, and their artifacts' builders read as never recorded.
var migrations = [][]string{
	{
		`ALTER TABLE runs RENAME COLUMN runner_digest TO runner_image_digest`,
		`DROP INDEX runs_by_runner`,
		`CREATE INDEX runs_by_runner_image ON runs (runner_image_digest, run_id)`,
		`ALTER TABLE runs ADD COLUMN runner_binary_sha256 TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE runs ADD COLUMN secret_version TEXT NOT NULL DEFAULT ''`,
		`CREATE INDEX runs_by_runner_binary ON runs (runner_binary_sha256, run_id)`,
		`CREATE INDEX runs_by_secret_version ON runs (secret_version, run_id)`,
		`UPDATE runs SET manifest = json_set(json_remove(manifest, '$.runner_digest'),
			'$.runner_image_digest', json_extract(manifest, '$.runner_digest'),
			'$.runner_binary_sha256', '', '$.verification_policy_revision', '', '$.secret_version', '')`,
	},
	{
		`ALTER TABLE runs ADD COLUMN request_key TEXT NOT NULL DEFAULT ''`,
		`CREATE INDEX runs_by_request_key ON runs (request_key, run_id)`,
	},
	{artifactProvenance},
}

// openWhere selects the runs that are not final. The partial index
// runs_open holds those runs only (status first, then run_id, so that it
// covers Open), so Open reads a few entries whatever the number of finished
// runs; Open's WHERE is the same text, which is how SQLite knows the index
// applies.
const openWhere = `status IN ('` + string(runmanifest.StatusGranted) + `', '` + string(runmanifest.StatusRunning) + `')`

// additions are indexes added to a schema version after its release. They
// change nothing an older build reads or writes (SQLite maintains every
// index), so they need no new version: a file gets them when it is opened.
var additions = []string{
	`CREATE INDEX IF NOT EXISTS runs_open ON runs (status, run_id) WHERE ` + openWhere,
	`CREATE INDEX IF NOT EXISTS runs_by_node ON runs (json_extract(manifest, '$.node_id'), run_id)`,
	`CREATE INDEX IF NOT EXISTS runs_by_runtime_class ON runs (json_extract(manifest, '$.runtime_class'), run_id)`,
	`CREATE INDEX IF NOT EXISTS runs_by_control_plane ON runs (json_extract(manifest, '$.control_plane_digest'), run_id)`,
}

// manifestCriteria are Query's criteria read from the manifest (by an
// expression index), not from a column: the SQL expression of each, and
// its value in q.
func manifestCriteria(q runmanifest.Query) [][2]string {
	return [][2]string{{"node_id", q.Node}, {"runtime_class", q.RuntimeClass}}
}

// queryColumns are the manifest fields copied into columns for Query, in
// Query's order.
var queryColumns = []string{"workspace_template_id", "runner_image_digest", "runner_binary_sha256", "node_image_id",
	"policy_revision", "secret_version", "generation", "request_key"}

func queryColumnValues(q runmanifest.Query) []string {
	return []string{q.Template, q.RunnerImage, q.RunnerBinary, q.NodeImage, q.Policy, q.SecretVersion, q.Generation, q.RequestKey}
}

func manifestColumns(m *runmanifest.Manifest) []string {
	return []string{m.WorkspaceTemplateID, m.RunnerImageDigest, m.RunnerBinarySHA256, m.NodeImageID,
		m.PolicyRevision, m.SecretVersion, m.Generation, m.RequestKey}
}

// SQLite is a Store in one SQLite file (modernc.org/sqlite: pure Go, no cgo).
//
// The file is in WAL mode with synchronous=FULL: a Create or Update that
// returned nil survives the process being killed and the machine losing
// power. Writes go through one connection and take the write lock when they
// begin (BEGIN IMMEDIATE), so concurrent writers queue instead of failing;
// reads use a pool of read-only connections and see the last commit, never
// waiting for writers. Several processes may open the same file (they wait
// for each other's writes up to the busy timeout).
type SQLite struct {
	w, r    *sql.DB
	path    string
	insert  *sql.Stmt // on w
	creates createQueue
	// createCommits counts the group commits of Creates, for tests.
	createCommits atomic.Int64
}

var _ Store = (*SQLite)(nil)

// pageSize is the page size of a new database file: a stored manifest is
// about 2 KB, and 4 KB pages would hold one each, half empty.
const pageSize = 8192

// busyTimeoutMillis is how long a connection waits for another one's lock
// (another process writing the same file) before giving up with SQLITE_BUSY.
const busyTimeoutMillis = 10000

// OpenSQLite opens the store in the SQLite file at path, creating the file
// and the schema if needed. Reopening a file keeps everything stored in it.
// The folder must exist; path names a file on disk (":memory:" and URIs are
// refused: readers and the writer must share one database).
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") || strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("%w: sqlite path %q: want a file path without '?' (no URI, no :memory:)", ErrInvalid, path)
	}
	common := fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeoutMillis)
	// page_size applies to a new file only (it comes before WAL mode)
	w, err := sql.Open("sqlite", path+"?"+common+fmt.Sprintf("&_pragma=page_size(%d)", pageSize)+
		"&_journal_mode=WAL&_synchronous=FULL&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("runs: open %s: %w", path, err)
	}
	// One writer connection: SQLite has one writer at a time anyway, and
	// queueing in database/sql is cheaper than retrying on SQLITE_BUSY.
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)
	s := &SQLite{w: w, path: path}
	if err := s.migrate(ctx); err != nil {
		w.Close()
		return nil, err
	}
	// statistics for the query planner (SQLite's advice for long-lived
	// connections): quick, as analysis_limit samples each index
	if _, err := w.ExecContext(ctx, `PRAGMA analysis_limit = 1000`); err != nil {
		w.Close()
		return nil, fmt.Errorf("runs: open %s: %w", path, err)
	}
	if _, err := w.ExecContext(ctx, `PRAGMA optimize = 0x10002`); err != nil {
		w.Close()
		return nil, fmt.Errorf("runs: open %s: optimize: %w", path, err)
	}
	r, err := sql.Open("sqlite", path+"?"+common+"&_query_only=1")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("runs: open %s: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	s.r = r
	s.insert, err = w.PrepareContext(ctx, `INSERT INTO runs (run_id, status, `+strings.Join(queryColumns, ", ")+`, manifest)
		VALUES (?, ?, `+strings.Repeat("?, ", len(queryColumns))+`?) ON CONFLICT (run_id) DO NOTHING`)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("runs: %s: %w", path, err)
	}
	return s, nil
}

// migrate creates the schema in a new file and checks the version of an
// existing one.
func (s *SQLite) migrate(ctx context.Context) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("runs: open %s: %w", s.path, err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_version'`).Scan(&n); err != nil {
		return fmt.Errorf("runs: open %s: %w", s.path, err)
	}
	if n == 1 {
		var v int
		if err := tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v); err != nil {
			return fmt.Errorf("runs: open %s: schema version: %w", s.path, err)
		}
		if v > SchemaVersion || v < 1 {
			return fmt.Errorf("%w: %s has schema version %d, this build knows 1 to %d", ErrSchema, s.path, v, SchemaVersion)
		}
		for ; v < SchemaVersion; v++ {
			for _, stmt := range migrations[v-1] {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("runs: migrate %s from schema version %d to %d: %w", s.path, v, v+1, err)
				}
			}
			if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ?`, v+1); err != nil {
				return fmt.Errorf("runs: migrate %s to schema version %d: %w", s.path, v+1, err)
			}
		}
	} else {
		for _, stmt := range schema {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("runs: create schema in %s: %w", s.path, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (?)`, SchemaVersion); err != nil {
			return fmt.Errorf("runs: create schema in %s: %w", s.path, err)
		}
	}
	for _, stmt := range additions {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("runs: add to the schema of %s: %w", s.path, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("runs: open %s: schema: %w", s.path, err)
	}
	return nil
}

// Path is the file the store is in.
func (s *SQLite) Path() string { return s.path }

// Close closes the connections. The last one to close checkpoints the
// write-ahead log into the database file.
func (s *SQLite) Close() error {
	var errs []error
	if _, err := s.w.Exec(`PRAGMA optimize`); err != nil {
		errs = append(errs, fmt.Errorf("optimize: %w", err))
	}
	if s.insert != nil {
		errs = append(errs, s.insert.Close())
	}
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("runs: close %s: %w", s.path, err)
	}
	return nil
}

// Create implements Store. Concurrent Creates share one transaction, and
// one flush of the disk (see createQueue).
func (s *SQLite) Create(ctx context.Context, m *runmanifest.Manifest) error { return s.create(ctx, m) }

// createAll creates every manifest of ms in one transaction: all or none.
// The benchmark loads its million manifests through it.
func (s *SQLite) createAll(ctx context.Context, ms iter.Seq[*runmanifest.Manifest]) (int, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("runs: create: %w", err)
	}
	defer tx.Rollback()
	insert := tx.StmtContext(ctx, s.insert)
	n := 0
	for m := range ms {
		if m == nil {
			return 0, fmt.Errorf("%w: manifest: nil", ErrInvalid)
		}
		m = m.Clone()
		if m.Status == "" {
			m.Status = runmanifest.StatusGranted
		}
		m.Normalize()
		if err := m.Validate(); err != nil {
			return 0, err
		}
		doc, err := json.Marshal(m)
		if err != nil {
			return 0, fmt.Errorf("runs: create %s: %w", m.RunID, err)
		}
		args := []any{m.RunID, string(m.Status)}
		for _, v := range manifestColumns(m) {
			args = append(args, v)
		}
		args = append(args, string(doc)) // text, as the JSON functions expect
		res, err := insert.ExecContext(ctx, args...)
		if err != nil {
			return 0, fmt.Errorf("runs: create %s: %w", m.RunID, err)
		}
		if k, err := res.RowsAffected(); err != nil {
			return 0, fmt.Errorf("runs: create %s: %w", m.RunID, err)
		} else if k == 0 {
			return 0, fmt.Errorf("%w: %s", ErrExists, m.RunID)
		}
		n++
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("runs: create: commit: %w", err)
	}
	return n, nil
}

// Update implements Store.
func (s *SQLite) Update(ctx context.Context, runID string, fn func(*runmanifest.Manifest) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("runs: update %s: %w", runmanifest.SafeID(runID), err)
	}
	defer tx.Rollback()
	var id int64
	var doc []byte
	err = tx.QueryRowContext(ctx, `SELECT id, manifest FROM runs WHERE run_id = ?`, runID).Scan(&id, &doc)
	if errors.Is(err, sql.ErrNoRows) {
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
	oldColumns, next, err := change(runID, m, fn)
	if err != nil {
		return err
	}
	if bytes.Equal(next, doc) {
		return nil
	}
	// set only the query columns that changed: an index is rewritten only
	// when its column is set
	set := []string{"status = ?"}
	args := []any{string(m.Status)}
	for i, v := range manifestColumns(m) {
		if v != oldColumns[i] {
			set = append(set, queryColumns[i]+" = ?")
			args = append(args, v)
		}
	}
	set = append(set, "manifest = ?")
	args = append(args, string(next), id)
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET `+strings.Join(set, ", ")+` WHERE id = ?`, args...); err != nil {
		return fmt.Errorf("runs: update %s: %w", runID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("runs: update %s: commit: %w", runID, err)
	}
	return nil
}

// Get implements Store.
func (s *SQLite) Get(ctx context.Context, runID string) (*runmanifest.Manifest, error) {
	var doc []byte
	err := s.r.QueryRowContext(ctx, `SELECT manifest FROM runs WHERE run_id = ?`, runID).Scan(&doc)
	return stored(runID, doc, err, errors.Is(err, sql.ErrNoRows))
}

// Query implements Store.
func (s *SQLite) Query(ctx context.Context, q runmanifest.Query) ([]string, error) {
	stmt, args, err := sqliteQuery(q)
	if err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("runs: query: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() { // one row, or one per artifact a package query walks
		var all sql.NullString
		if err := rows.Scan(&all); err != nil {
			return nil, fmt.Errorf("runs: query: %w", err)
		}
		if all.Valid {
			ids = append(ids, strings.Split(all.String, "\n")...)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("runs: query: %w", err)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if q.Limit > 0 && len(ids) > q.Limit {
		ids = ids[:q.Limit]
	}
	return ids, nil
}

// Open implements Store. It reads the partial index runs_open alone.
func (s *SQLite) Open(ctx context.Context) ([]string, error) {
	var all sql.NullString
	if err := s.r.QueryRowContext(ctx, openStmt).Scan(&all); err != nil {
		return nil, fmt.Errorf("runs: open runs: %w", err)
	}
	var ids []string
	if all.Valid {
		ids = strings.Split(all.String, "\n")
	}
	slices.Sort(ids)
	return ids, nil
}

const openStmt = `SELECT group_concat(run_id, char(10)) FROM runs WHERE ` + openWhere

// sqliteQuery builds the statement of q. A package query walks the package index to
// the templates holding the package and each template's runs through
// runs_by_template (CROSS JOIN and INDEXED BY fix that plan; a runner's
// index, say, would be walked once per template); the other criteria filter.
// With several column criteria SQLite picks the most selective index from
// the statistics PRAGMA optimize keeps. The ids are sorted in Go: asking
// SQLite for ORDER BY run_id invites it to scan the run_id index of every
// run instead.
func sqliteQuery(q runmanifest.Query) (string, []any, error) {
	if err := checkQuery(q); err != nil {
		return "", nil, err
	}
	var where []string
	var args []any
	for i, v := range queryColumnValues(q) {
		if v != "" {
			where = append(where, "r."+queryColumns[i]+" = ?")
			args = append(args, v)
		}
	}
	for _, c := range manifestCriteria(q) {
		if c[1] != "" {
			where = append(where, "json_extract(r.manifest, '$."+c[0]+"') = ?")
			args = append(args, c[1])
		}
	}
	if q.RunIDPrefix != "" {
		where = append(where, "substr(r.run_id, 1, ?) = ?")
		args = append(args, len(q.RunIDPrefix), q.RunIDPrefix)
	}
	// The ids come back as one string, newline-separated (run ids hold no
	// white space): a package query matches tens of thousands of runs, and
	// stepping database/sql through them row by row made the B7 package
	// query take 31-36 ms instead of 19-21 ms.
	if q.Package == "" {
		return "SELECT group_concat(r.run_id, char(10)) FROM runs r WHERE " + strings.Join(where, " AND "), args, nil
	}
	p, err := runmanifest.ParsePackage(q.Package)
	if err != nil {
		return "", nil, err
	}
	// One branch per artifact a package can be recorded for, each walking
	// the package index to that artifact's runs through its own index
	// (+p.template_id has no affinity, so the expression index on the
	// control plane's digest applies), each giving one row; Query merges
	// them and drops a run found twice (its template and its runner both
	// holding the package).
	var branches []string
	var all []any
	for _, a := range packageArtifacts {
		w := append([]string{"p.name = ?", "p.version = ?"}, where...)
		branches = append(branches, "SELECT group_concat(r.run_id, char(10)) FROM template_packages p CROSS JOIN runs r INDEXED BY "+a.sqliteIndex+
			" ON "+a.sqlite+" = +p.template_id WHERE "+strings.Join(w, " AND "))
		all = append(append(all, p.Name, p.Version), args...)
	}
	return strings.Join(branches, " UNION ALL "), all, nil
}

// packageArtifacts are the identities of a run's artifacts whose packages
// the index records (RecordPackages): its workspace template, its runner
// image and its control-plane image, each with the index that leads from
// it to the runs.
var packageArtifacts = []struct{ sqlite, sqliteIndex, postgres string }{
	{"r.workspace_template_id", "runs_by_template", "r.workspace_template_id"},
	{"r.runner_image_digest", "runs_by_runner_image", "r.runner_image_digest"},
	{"json_extract(r.manifest, '$.control_plane_digest')", "runs_by_control_plane", "(r.manifest->>'control_plane_digest')"},
}

// RecordPackages implements Store.
func (s *SQLite) RecordPackages(ctx context.Context, templateID string, pkgs []runmanifest.Package) (runmanifest.Change, error) {
	set, sum, err := packageSet(templateID, pkgs)
	if err != nil {
		return "", err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("runs: record packages of %s: %w", templateID, err)
	}
	defer tx.Rollback()
	change := runmanifest.Created
	var old string
	switch err := tx.QueryRowContext(ctx, `SELECT packages_sha256 FROM templates WHERE template_id = ?`, templateID).Scan(&old); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return "", fmt.Errorf("runs: record packages of %s: %w", templateID, err)
	case old == sum:
		return runmanifest.Unchanged, nil
	default:
		change = runmanifest.Updated
		if _, err := tx.ExecContext(ctx, `DELETE FROM template_packages WHERE template_id = ?`, templateID); err != nil {
			return "", fmt.Errorf("runs: record packages of %s: %w", templateID, err)
		}
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO template_packages (template_id, name, version) VALUES (?, ?, ?)`)
	if err != nil {
		return "", fmt.Errorf("runs: record packages of %s: %w", templateID, err)
	}
	defer ins.Close()
	for _, p := range set {
		if _, err := ins.ExecContext(ctx, templateID, p.Name, p.Version); err != nil {
			return "", fmt.Errorf("runs: record packages of %s: %s: %w", templateID, p, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO templates (template_id, packages_sha256, package_count) VALUES (?, ?, ?)
		ON CONFLICT (template_id) DO UPDATE SET packages_sha256 = excluded.packages_sha256, package_count = excluded.package_count`,
		templateID, sum, len(set)); err != nil {
		return "", fmt.Errorf("runs: record packages of %s: %w", templateID, err)
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("runs: record packages of %s: commit: %w", templateID, err)
	}
	return change, nil
}

// Packages implements Store.
func (s *SQLite) Packages(ctx context.Context, templateID string) ([]runmanifest.Package, bool, error) {
	if err := runmanifest.CheckID(templateID); err != nil {
		return nil, false, fmt.Errorf("%w: packages: template id: %s", ErrInvalid, err)
	}
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, false, fmt.Errorf("runs: packages of %s: %w", templateID, err)
	}
	defer tx.Rollback()
	var n int
	switch err := tx.QueryRowContext(ctx, `SELECT package_count FROM templates WHERE template_id = ?`, templateID).Scan(&n); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("runs: packages of %s: %w", templateID, err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT name, version FROM template_packages WHERE template_id = ? ORDER BY name, version`, templateID)
	if err != nil {
		return nil, false, fmt.Errorf("runs: packages of %s: %w", templateID, err)
	}
	defer rows.Close()
	out := make([]runmanifest.Package, 0, n)
	for rows.Next() {
		var p runmanifest.Package
		if err := rows.Scan(&p.Name, &p.Version); err != nil {
			return nil, false, fmt.Errorf("runs: packages of %s: %w", templateID, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("runs: packages of %s: %w", templateID, err)
	}
	return out, true, nil
}

// checkQuery refuses a query without a criterion or with a negative limit.
func checkQuery(q runmanifest.Query) error {
	if q.Limit < 0 {
		return fmt.Errorf("%w: query: limit %d is negative", ErrInvalid, q.Limit)
	}
	if q.Empty() {
		return fmt.Errorf("%w: query: no criterion (template, runner image, runner binary, node image, node, runtime class, policy, secret version, generation, request key, package or run id prefix)", ErrInvalid)
	}
	return nil
}

func cmpPackage(a, b runmanifest.Package) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return strings.Compare(a.Version, b.Version)
}
