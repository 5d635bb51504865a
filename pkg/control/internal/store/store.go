package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	_ "modernc.org/sqlite" // the embedded default database
)

// Errors of a request, each a 4xx.
var (
	ErrBadRequest = errors.New("control: bad request")
	ErrForbidden  = errors.New("control: forbidden")
)

// Store errors. ErrNotFound also answers a job of another tenant (a tenant
// cannot learn that a job id exists).
var (
	ErrNotFound    = errors.New("control: not found")
	ErrConflict    = errors.New("control: conflict")
	ErrUnavailable = errors.New("control: database unavailable")
	// ErrBadDSN is a database name no retry can fix: neither sqlite:PATH
	// nor a postgres:// URL pgx can parse.
	ErrBadDSN = errors.New("control: bad database name")
)

// Store keeps the control plane's durable records: jobs and their
// transitions, tenants' counters, tokens, the audit log and the profiles
// jobs resolved. One implementation on database/sql serves SQLite
// (modernc.org/sqlite) and PostgreSQL (pgx's stdlib driver); the few
// differences are in dialect.
type Store struct {
	w, r *sql.DB
	d    dialect
	// dsn is what OpenQueue opens River on.
	dsn     string
	submits submitGroups
	txs     txGroups
	appends appendGroups
	// prepared statements (SQLite: parsing a statement costs more than
	// running it), nil where not prepared
	authStmt   *sql.Stmt
	boundsStmt *sql.Stmt
	rowStmts   map[string]*sql.Stmt // on the writer
	readStmts  map[string]*sql.Stmt // on the readers
	// ev wakes the readers of the event streams (events_hub.go).
	ev eventHub
	// storedProfiles holds the digests of profiles this store committed
	// (a profile's row is never changed or deleted): a submission batch
	// writes only the others.
	storedProfiles sync.Map
	// liveTokens: id -> liveToken, the tokens Authenticate found live
	// (authenticateSubmit).
	liveTokens sync.Map
	// seen is what the last committed submission batch left of the queues
	// (queuesSeen): overBound reads the counters only near a bound.
	seenMu sync.Mutex
	seen   queueCounts
}

type dialect struct {
	name     string
	autoID   string // the audit table's key column
	double   string
	lockStmt string // serialises admitters (PostgreSQL: across replicas)
}

var (
	sqliteDialect   = dialect{name: "sqlite", autoID: "INTEGER PRIMARY KEY AUTOINCREMENT", double: "REAL"}
	postgresDialect = dialect{name: "postgres", autoID: "BIGSERIAL PRIMARY KEY", double: "DOUBLE PRECISION",
		lockStmt: "SELECT pg_advisory_xact_lock(7271100016)"}
)

// q rewrites ? placeholders to $n for PostgreSQL, +? too (the unary plus
// is SQLite's alone: see hotStmts; PostgreSQL would take it for a number).
func (d dialect) q(s string) string {
	if d.name != "postgres" {
		return s
	}
	var b strings.Builder
	n := 0
	for i, c := range s {
		if c == '+' && i+1 < len(s) && s[i+1] == '?' {
			continue
		}
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

const BusyTimeoutMillis = 10000

// Open opens the store named by a DSN: sqlite:PATH or postgres://...
func Open(ctx context.Context, dsn string) (*Store, error) {
	if err := CheckDSN(dsn); err != nil {
		return nil, err
	}
	if strings.HasPrefix(dsn, "sqlite:") {
		return OpenSQLite(ctx, strings.TrimPrefix(dsn, "sqlite:"))
	}
	return OpenPostgres(ctx, dsn)
}

// CheckDSN says (ErrBadDSN) whether dsn names a database Open can open,
// without reaching it: sqlite:PATH or a postgres:// URL pgx parses.
func CheckDSN(dsn string) error {
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		if strings.TrimPrefix(dsn, "sqlite:") == "" {
			return fmt.Errorf("%w: sqlite: empty path", ErrBadDSN)
		}
		return nil
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		if _, err := pgx.ParseConfig(dsn); err != nil {
			return fmt.Errorf("%w: postgres: %w", ErrBadDSN, err) // pgx redacts the password
		}
		return nil
	}
	return fmt.Errorf("%w %q: want sqlite:PATH or a postgres:// URL", ErrBadDSN, redactDSN(dsn))
}

// OpenSQLite opens (creating) the store in the SQLite file at path. River's
// queue lives in a file of its own beside it (path + "-queue").
func OpenSQLite(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("control: sqlite: empty path")
	}
	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)", BusyTimeoutMillis)
	w, err := sql.Open("sqlite", path+"?"+common+"&_journal_mode=WAL&_synchronous=FULL&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("control: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	s := &Store{w: w, d: sqliteDialect, dsn: "sqlite:" + path}
	if err := s.migrate(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("control: %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", path+"?"+common+"&_query_only=1")
	if err != nil {
		w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(4)
	s.r = r
	if err := s.prepare(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("control: %s: %w", path, err)
	}
	return s, nil
}

// Schema is the PostgreSQL schema of the control plane's tables.
const Schema = "slipway_control"

// OpenPostgres opens the store in a PostgreSQL database (the tables in
// schema slipway_control); several control planes may share it.
func OpenPostgres(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: %w", ErrBadDSN, err) // pgx redacts the password
	}
	cfg.RuntimeParams["search_path"] = Schema // created, if new, by migrate
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	s := &Store{w: db, r: db, d: postgresDialect, dsn: dsn}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("control: postgres %s: %w", redactDSN(dsn), err)
	}
	return s, nil
}

// Close closes the store.
func (s *Store) Close() error {
	s.ev.close()
	err := s.w.Close()
	if s.r != s.w {
		err = errors.Join(err, s.r.Close())
	}
	return err
}

// Dialect is "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.d.name }

func redactDSN(dsn string) string {
	if i := strings.Index(dsn, "@"); i > 0 {
		if j := strings.Index(dsn, "://"); j > 0 && j < i {
			return dsn[:j+3] + "…" + dsn[i:]
		}
	}
	return dsn
}

// Unavailable marks errors of a database that cannot be reached.
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, s := range []string{"connection refused", "failed to connect", "broken pipe", "connection reset",
		"unexpected EOF", "terminating connection", "the database system is", "conn closed", "no such host"} {
		if strings.Contains(msg, s) {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	return err
}

func (s *Store) migrate(ctx context.Context) error {
	d := s.d
	stmts := []string{
		`CREATE TABLE IF NOT EXISTS cp_jobs (
			id TEXT PRIMARY KEY,
			tenant TEXT NOT NULL,
			idem_key TEXT NOT NULL,
			request_hash TEXT NOT NULL,
			pool TEXT NOT NULL,
			state TEXT NOT NULL,
			created_ns BIGINT NOT NULL,
			lease_owner TEXT NOT NULL DEFAULT '',
			lease_until_ns BIGINT NOT NULL DEFAULT 0,
			dispatch_due_ns BIGINT NOT NULL DEFAULT 0,
			worst_case ` + d.double + ` NOT NULL DEFAULT 0,
			doc TEXT NOT NULL,
			grant_token TEXT NOT NULL DEFAULT '',
			UNIQUE (tenant, idem_key))`,
		`CREATE INDEX IF NOT EXISTS cp_jobs_queue ON cp_jobs (tenant, state, created_ns)`,
		`CREATE INDEX IF NOT EXISTS cp_jobs_state ON cp_jobs (state, lease_until_ns)`,
		`CREATE TABLE IF NOT EXISTS cp_transitions (
			job_id TEXT NOT NULL, seq INTEGER NOT NULL, at_ns BIGINT NOT NULL,
			state TEXT NOT NULL, reason TEXT NOT NULL, PRIMARY KEY (job_id, seq))`,
		`CREATE TABLE IF NOT EXISTS cp_tenants (
			tenant TEXT PRIMARY KEY,
			queued INTEGER NOT NULL DEFAULT 0,
			active INTEGER NOT NULL DEFAULT 0,
			reserved ` + d.double + ` NOT NULL DEFAULT 0,
			spent ` + d.double + ` NOT NULL DEFAULT 0,
			unknown_cost INTEGER NOT NULL DEFAULT 0,
			period_ns BIGINT NOT NULL DEFAULT 0,
			last_admit_ns BIGINT NOT NULL DEFAULT 0)`,
		`CREATE TABLE IF NOT EXISTS cp_plane (id INTEGER PRIMARY KEY, queued INTEGER NOT NULL DEFAULT 0)`,
		`INSERT INTO cp_plane (id, queued) VALUES (1, 0) ON CONFLICT (id) DO NOTHING`,
		`CREATE TABLE IF NOT EXISTS cp_tokens (
			id TEXT PRIMARY KEY, tenant TEXT NOT NULL, scope TEXT NOT NULL, hash TEXT NOT NULL,
			label TEXT NOT NULL, created_ns BIGINT NOT NULL, revoked_ns BIGINT NOT NULL DEFAULT 0)`,
		`CREATE TABLE IF NOT EXISTS cp_audit (
			id ` + d.autoID + `, at_ns BIGINT NOT NULL, token_id TEXT NOT NULL, tenant TEXT NOT NULL,
			scope TEXT NOT NULL, method TEXT NOT NULL, path TEXT NOT NULL, status INTEGER NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS cp_profiles (
			digest TEXT PRIMARY KEY, name TEXT NOT NULL, revision TEXT NOT NULL, path TEXT NOT NULL, raw TEXT NOT NULL)`,
	}
	stmts = append(stmts, eventSchema(d)...)    // events_store.go
	stmts = append(stmts, deliverySchema(d)...) // delivery_store.go
	if s.d.name == "postgres" {
		// Replicas that start at once create the schema once: under the
		// admitters' advisory lock, in one transaction (PostgreSQL's DDL
		// is transactional). Without it, two CREATE TABLE IF NOT EXISTS
		// of the same new table race on the catalog (pg_type's unique
		// index) and one replica's start fails.
		err := s.txAlone(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, s.d.lockStmt); err != nil {
				return err
			}
			// the schema too: two CREATE SCHEMA IF NOT EXISTS race on
			// pg_namespace's unique index as tables do on pg_type's
			if _, err := tx.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+Schema); err != nil {
				return err
			}
			for _, st := range stmts {
				if _, err := tx.ExecContext(ctx, st); err != nil {
					return err
				}
			}
			return s.migrateEventRows(ctx, tx) // events_segments.go
		})
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		return nil
	}
	for _, st := range stmts {
		if _, err := s.w.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("migrate: %w", Unavailable(err))
		}
	}
	if err := s.tx(ctx, func(tx *sql.Tx) error { return s.migrateEventRows(ctx, tx) }); err != nil { // events_segments.go
		return fmt.Errorf("migrate: events: %w", err)
	}
	return nil
}

// tx runs f in a write transaction.
//
// f may run more than once (on SQLite, when a group commit fails as a whole
// each of its functions runs again alone): what it reports to its caller
// it sets, never accumulates, on every run.
func (s *Store) tx(ctx context.Context, f func(*sql.Tx) error) error {
	if s.d.name == "sqlite" {
		return s.groupedTx(ctx, f) // grouptx.go
	}
	return s.txAlone(ctx, f)
}

// txAlone runs f in a transaction of its own.
func (s *Store) txAlone(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Unavailable(err)
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		s.ev.done(tx, false)
		return Unavailable(err)
	}
	err = tx.Commit()
	s.ev.done(tx, err == nil) // wake the readers of the streams tx appended to
	return Unavailable(err)
}

// exec runs q in tx (prepared on SQLite when q is one of hotStmts) and
// returns the rows it changed.
func (s *Store) exec(ctx context.Context, tx *sql.Tx, q string, args ...any) (int64, error) {
	var res sql.Result
	var err error
	if st := s.rowStmts[q]; st != nil {
		res, err = tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	} else {
		res, err = tx.ExecContext(ctx, s.d.q(q), args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// queryRow is tx.QueryRowContext, prepared on SQLite when q is one of
// hotStmts.
func (s *Store) queryRow(ctx context.Context, tx *sql.Tx, q string, args ...any) *sql.Row {
	if st := s.rowStmts[q]; st != nil {
		return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, s.d.q(q), args...)
}

// hotStmts are the statements every admission and transition runs, each
// declared with hot where it is used; prepare prepares them once on
// SQLite's writer, where parsing a statement costs more than running it.
//
// A hot statement compares a column that is the first of a longer index
// key with +? rather than ?, and takes its LIMIT as +?: modernc's SQLite
// is built with STAT4, and a prepared statement whose plan may depend on
// such a parameter's value is compiled again on every step after a new
// binding (sqlite3Reprepare: 7% of B8b's CPU); +? keeps the index and the
// one compilation. The readers' prepared statements (readStmts) follow the
// same rule.
var hotStmts []string

func hot(q string) string {
	hotStmts = append(hotStmts, q)
	return q
}

var insTransitionNext = hot(`INSERT INTO cp_transitions (job_id, seq, at_ns, state, reason)
		SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ? FROM cp_transitions WHERE job_id = +?`)

func (s *Store) addTransition(ctx context.Context, tx *sql.Tx, id string, st controlapi.State, reason string, at time.Time) error {
	_, err := s.exec(ctx, tx, insTransitionNext, id, at.UnixNano(), string(st), reason, id)
	if err != nil {
		return err
	}
	// the transition's state event (and result event) in the same transaction
	return s.appendTransition(ctx, tx, id, st, reason, at)
}

func scanJob(doc string) (*controlapi.Job, error) {
	var j controlapi.Job
	if err := json.Unmarshal([]byte(doc), &j); err != nil {
		return nil, fmt.Errorf("control: stored job: %w", err)
	}
	return &j, nil
}

// Get returns the job with its story. A tenant other than the job's gets
// ErrNotFound; tenant "" is the operator and sees every job.
func (s *Store) Get(ctx context.Context, tenant, id string) (*controlapi.Job, error) {
	var doc, owner string
	err := s.r.QueryRowContext(ctx, s.d.q(`SELECT doc, tenant FROM cp_jobs WHERE id = ?`), id).Scan(&doc, &owner)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && tenant != "" && owner != tenant) {
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, Unavailable(err)
	}
	j, err := scanJob(doc)
	if err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, s.d.q(`SELECT seq, at_ns, state, reason FROM cp_transitions WHERE job_id = ? ORDER BY seq`), id)
	if err != nil {
		return nil, Unavailable(err)
	}
	defer rows.Close()
	for rows.Next() {
		var t controlapi.Transition
		var at int64
		if err := rows.Scan(&t.Seq, &at, &t.State, &t.Reason); err != nil {
			return nil, err
		}
		t.At = time.Unix(0, at).UTC()
		j.Story = append(j.Story, t)
	}
	return j, Unavailable(rows.Err())
}

// ListFilter selects jobs for List.
type ListFilter struct {
	// Tenant limits the list to one tenant's jobs ("" : all, operators only).
	Tenant string
	State  controlapi.State
	Limit  int
}

// List returns jobs, newest first.
func (s *Store) List(ctx context.Context, f ListFilter) ([]*controlapi.Job, error) {
	q := `SELECT doc FROM cp_jobs WHERE 1 = 1`
	var args []any
	if f.Tenant != "" {
		q += ` AND tenant = ?`
		args = append(args, f.Tenant)
	}
	if f.State != "" {
		q += ` AND state = ?`
		args = append(args, string(f.State))
	}
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 100
	}
	q += ` ORDER BY created_ns DESC, id DESC LIMIT ` + strconv.Itoa(f.Limit)
	rows, err := s.r.QueryContext(ctx, s.d.q(q), args...)
	if err != nil {
		return nil, Unavailable(err)
	}
	out, err := scanJobs(rows)
	return out, Unavailable(err)
}

// scanJobs reads rows of one doc column as jobs, and closes them.
func scanJobs(rows *sql.Rows) ([]*controlapi.Job, error) {
	defer rows.Close()
	var out []*controlapi.Job
	for rows.Next() {
		var doc string
		if err := rows.Scan(&doc); err != nil {
			return nil, err
		}
		j, err := scanJob(doc)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// StoredProfile returns a profile document a job resolved, by digest.
func (s *Store) StoredProfile(ctx context.Context, digest string) (raw []byte, err error) {
	var r string
	err = s.r.QueryRowContext(ctx, s.d.q(`SELECT raw FROM cp_profiles WHERE digest = ?`), digest).Scan(&r)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("profile %s: %w", digest, ErrNotFound)
	}
	return []byte(r), Unavailable(err)
}

// Usage returns every tenant's counters.
func (s *Store) Usage(ctx context.Context) ([]controlapi.TenantUsage, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT tenant, queued, active, reserved, spent, unknown_cost FROM cp_tenants ORDER BY tenant`)
	if err != nil {
		return nil, Unavailable(err)
	}
	defer rows.Close()
	var out []controlapi.TenantUsage
	for rows.Next() {
		var u controlapi.TenantUsage
		if err := rows.Scan(&u.Tenant, &u.Queued, &u.Active, &u.Reserved, &u.Spent, &u.UnknownCost); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// Single-row inserts of a group commit, prepared once (SQLite).
const (
	insJob        = `INSERT INTO cp_jobs (id, tenant, idem_key, request_hash, pool, state, created_ns, worst_case, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	insTransition = `INSERT INTO cp_transitions (job_id, seq, at_ns, state, reason) VALUES (?, 1, ?, ?, ?)`
	insEventHead  = `INSERT INTO cp_event_heads (job_id, last_seq, output_bytes, ended) VALUES (?, 1, 0, 0)`
	insEvent      = `INSERT INTO cp_event_segments (job_id, last_seq, first_seq, at_ns, output, events, size) VALUES (?, 1, 1, ?, 0, ?, ?)`
	selKey        = `SELECT doc, request_hash FROM cp_jobs WHERE tenant = ? AND idem_key = ?`
	selBounds     = `SELECT COALESCE((SELECT queued FROM cp_tenants WHERE tenant = ?), 0), (SELECT queued FROM cp_plane WHERE id = 1)`
)

func (s *Store) prepare(ctx context.Context) error {
	var err error
	if s.authStmt, err = s.r.PrepareContext(ctx, s.d.q(`SELECT tenant, scope, hash, label, created_ns, revoked_ns FROM cp_tokens WHERE id = ?`)); err != nil {
		return err
	}
	s.rowStmts = map[string]*sql.Stmt{}
	if s.boundsStmt, err = s.r.PrepareContext(ctx, s.d.q(selBounds)); err != nil {
		return err
	}
	s.readStmts = map[string]*sql.Stmt{}
	for _, q := range []string{selEventHead, selSegments} {
		st, err := s.r.PrepareContext(ctx, s.d.q(q))
		if err != nil {
			return err
		}
		s.readStmts[q] = st
	}
	qs := append([]string{insJob, insTransition, insEventHead, insEvent, selKey}, hotStmts...)
	for _, n := range stmtChunks { // events_store.go
		qs = append(qs, upsertHeadsSQL(n), insertSegmentsSQL(n))
	}
	for _, q := range qs {
		st, err := s.w.PrepareContext(ctx, s.d.q(q))
		if err != nil {
			return err
		}
		s.rowStmts[q] = st
	}
	return nil
}

// DSN is what the store was opened on (redacted nowhere: it may hold a
// password; the queue opens River on it).
func (s *Store) DSN() string { return s.dsn }

// WriteDB and ReadDB are the store's writer and its readers (SQLite: one
// writer connection, a read-only pool; PostgreSQL: one pool for both).
func (s *Store) WriteDB() *sql.DB { return s.w }

// ReadDB is the store's readers' pool; see WriteDB.
func (s *Store) ReadDB() *sql.DB { return s.r }

// Q rewrites a query with ? placeholders into the store's dialect.
func (s *Store) Q(q string) string { return s.d.q(q) }

// Ping tells whether the database answers, within ctx.
func (s *Store) Ping(ctx context.Context) error { return s.w.PingContext(ctx) }
