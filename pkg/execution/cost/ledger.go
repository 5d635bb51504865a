package cost

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the pure-Go driver named "sqlite"
)

// StateFile is the ledger's file in a runtime's state directory, beside
// runs.db.
const StateFile = "cost.db"

// SchemaVersion is the version of the ledger's schema this build writes.
const SchemaVersion = 1

// ErrInvalid marks a bad argument or a ledger file this build cannot read.
var ErrInvalid = errors.New("cost: invalid")

// State is what a sandbox is doing, priced by its own rate.
type State string

// States of a sandbox in the ledger.
const (
	// WarmIdle: a warm member, from its creation until a claim takes it or
	// it is deleted (ready and unclaimed; its start included).
	WarmIdle State = "warm_idle"
	// Active: held by a claim (a run), from the claim or the cold start's
	// creation until it is deleted.
	Active State = "active"
	// Proof: held by a rollout's proof claim (never traffic), priced at
	// the active rate.
	Proof State = "proof"
	// Retained: stopped but kept. The local runtime has no such state (a
	// released sandbox is deleted, none is suspended): it is never
	// recorded there, and reports say so.
	Retained State = "retained"
)

var states = []State{WarmIdle, Active, Proof, Retained}

func (s State) valid() bool {
	for _, x := range states {
		if s == x {
			return true
		}
	}
	return false
}

// Entry says that sandbox SandboxID of Pool and Generation is in State
// from At on; RunID is the run holding an Active sandbox.
type Entry struct {
	SandboxID, Pool, Generation string
	State                       State
	RunID                       string
	At                          time.Time
}

// Usage is one sample of the bytes a sandbox keeps on disk (its
// workspace), held for Period from At (the sampling interval).
type Usage struct {
	SandboxID, Pool, Generation string
	Bytes                       int64
}

var schema = []string{
	`CREATE TABLE cost_schema (version INTEGER NOT NULL)`,
	// An interval is open while end_ns is NULL. One closed by a start that
	// found it open has end_unknown = 1: it ended somewhere between end_ns
	// (the last time its runtime was known alive) and end_max_ns (when the
	// next start found it).
	`CREATE TABLE intervals (
		id          INTEGER PRIMARY KEY,
		pool        TEXT NOT NULL,
		generation  TEXT NOT NULL,
		sandbox_id  TEXT NOT NULL,
		state       TEXT NOT NULL,
		run_id      TEXT NOT NULL DEFAULT '',
		start_ns    INTEGER NOT NULL,
		end_ns      INTEGER,
		end_unknown INTEGER NOT NULL DEFAULT 0,
		end_max_ns  INTEGER
	)`,
	`CREATE INDEX intervals_open ON intervals (sandbox_id) WHERE end_ns IS NULL`,
	`CREATE INDEX intervals_by_pool ON intervals (pool, start_ns)`,
	`CREATE INDEX intervals_by_sandbox ON intervals (sandbox_id, start_ns)`,
	`CREATE INDEX intervals_by_run ON intervals (run_id) WHERE run_id != ''`,
	`CREATE TABLE storage_samples (
		pool       TEXT NOT NULL,
		generation TEXT NOT NULL,
		sandbox_id TEXT NOT NULL,
		at_ns      INTEGER NOT NULL,
		period_ns  INTEGER NOT NULL,
		bytes      INTEGER NOT NULL
	)`,
	`CREATE INDEX storage_by_pool ON storage_samples (pool, at_ns)`,
	`CREATE INDEX storage_by_sandbox ON storage_samples (sandbox_id, at_ns)`,
	// alive holds one row: the last time the writer was known alive.
	`CREATE TABLE alive (id INTEGER PRIMARY KEY CHECK (id = 1), at_ns INTEGER NOT NULL)`,
	// starts: each opening of the ledger and how many open intervals it
	// closed as unknown; gaps: events the writer dropped (a full queue).
	`CREATE TABLE starts (at_ns INTEGER NOT NULL, recovered INTEGER NOT NULL)`,
	`CREATE TABLE gaps (at_ns INTEGER NOT NULL, events INTEGER NOT NULL)`,
}

// Ledger records the time every sandbox of a runtime spends in each state,
// and samples of the bytes each keeps on disk, in one SQLite file, or in
// PostgreSQL where runtime replicas share it (OpenLedgerPostgres).
//
// Recording never waits for the disk: Enter, Leave and Sample queue the
// event and return, and one writer commits what is queued in a
// transaction, as soon as the last commit ended (so a burst of claims
// costs one commit). The file is in WAL mode with synchronous=NORMAL: a
// committed event survives the process being killed (not a power loss of
// the host, which the local sandboxes do not survive either). The writer
// also marks the ledger alive every AliveEvery; when OpenLedger finds an
// interval still open (its runtime was killed), it closes it as ended at
// an unknown time between that mark and now, flagged, never silently.
type Ledger struct {
	w          *sql.DB
	path       string // what an error names: the file, or host:port/database
	pg         bool   // PostgreSQL: several writers share the tables
	writer     string // PostgreSQL: this writer's identity
	deadAfter  time.Duration
	aliveEvery time.Duration
	now        func() time.Time
	recovered  int
	opened     time.Time // Totals count from here

	mu      sync.Mutex
	queue   []event
	dropped int
	wake    chan struct{}
	flushed *sync.Cond // broadcast after each commit (on mu)
	seq     uint64     // events queued so far
	done    uint64     // events committed (or failed) so far
	lastErr error
	stop    chan struct{}
	stopped chan struct{}

	closing  sync.Once
	closeErr error

	// the time per pool and state since the Ledger was opened, for
	// metrics (tmu): closed intervals summed, open ones by sandbox
	tmu    sync.Mutex
	live   map[string]liveInterval
	closed map[poolState]float64
}

type poolState struct {
	pool  string
	state State
}

type liveInterval struct {
	poolState
	start time.Time
}

// Option configures a Ledger.
type Option func(*Ledger)

// AliveEvery sets how often the writer marks the ledger alive (default
// 5 s): the most an interval of a killed runtime is known to have lasted
// falls short of its real end by at most this much.
func AliveEvery(d time.Duration) Option { return func(l *Ledger) { l.aliveEvery = d } }

// Writer names this writer of a ledger in PostgreSQL (default: the host's
// name, a pod's, and the time it opened the ledger): each open interval
// carries the name of the writer that keeps it, and each writer its own
// alive mark. Two writers must never share a name.
func Writer(id string) Option { return func(l *Ledger) { l.writer = id } }

// DeadAfter sets how old a writer's alive mark must be before another
// writer of the same ledger in PostgreSQL takes it for dead and closes its
// open intervals (default 6 times AliveEvery).
func DeadAfter(d time.Duration) Option { return func(l *Ledger) { l.deadAfter = d } }

// withClock is for tests.
func withClock(now func() time.Time) Option { return func(l *Ledger) { l.now = now } }

// maxQueue bounds the events waiting for the writer; more are dropped and
// counted in gaps, so a stalled disk cannot grow the runtime's memory.
const maxQueue = 100000

type event struct {
	entry  *Entry
	seen   bool   // entry as observed: reopen its interval if the file has it
	leave  string // sandbox id
	at     time.Time
	usage  []Usage
	period time.Duration
}

// OpenLedger opens (or creates) the ledger at path for writing. Intervals a
// killed writer left open are closed first, as ending at an unknown time
// (Recovered says how many). Close it to commit what is queued.
func OpenLedger(ctx context.Context, path string, opts ...Option) (*Ledger, error) {
	if path == "" || strings.ContainsRune(path, '?') || strings.HasPrefix(path, "file:") || path == ":memory:" {
		return nil, fmt.Errorf("%w: ledger path %q: want a file path", ErrInvalid, path)
	}
	w, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_journal_mode=WAL&_synchronous=NORMAL&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("cost: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	l := newLedger(w, path, false, opts)
	if err := migrate(ctx, w, path); err != nil {
		w.Close()
		return nil, err
	}
	return l.start(ctx)
}

func newLedger(w *sql.DB, path string, pg bool, opts []Option) *Ledger {
	l := &Ledger{w: w, path: path, pg: pg, aliveEvery: 5 * time.Second, now: time.Now, wake: make(chan struct{}, 1),
		stop: make(chan struct{}), stopped: make(chan struct{}), live: map[string]liveInterval{}, closed: map[poolState]float64{}}
	l.flushed = sync.NewCond(&l.mu)
	for _, o := range opts {
		o(l)
	}
	l.opened = l.now()
	if l.deadAfter <= 0 {
		l.deadAfter = 6 * l.aliveEvery
	}
	return l
}

// start recovers what killed writers left open and starts the writer.
func (l *Ledger) start(ctx context.Context) (*Ledger, error) {
	var err error
	if l.pg {
		l.recovered, err = l.recoverDead(ctx, true)
	} else {
		l.recovered, err = l.recover(ctx)
	}
	if err != nil {
		l.w.Close()
		return nil, err
	}
	go l.run()
	return l, nil
}

// q is query in the ledger's dialect.
func (l *Ledger) q(query string) string { return sqlIn(l.pg, query) }

func migrate(ctx context.Context, w *sql.DB, path string) error {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("cost: open %s: %w", path, err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'cost_schema'`).Scan(&n); err != nil {
		return fmt.Errorf("cost: open %s: %w", path, err)
	}
	if n == 1 {
		var v int
		if err := tx.QueryRowContext(ctx, `SELECT version FROM cost_schema`).Scan(&v); err != nil {
			return fmt.Errorf("cost: open %s: schema version: %w", path, err)
		}
		if v != SchemaVersion {
			return fmt.Errorf("%w: %s has ledger schema version %d, this build knows %d", ErrInvalid, path, v, SchemaVersion)
		}
		return nil
	}
	for _, stmt := range schema {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("cost: create the ledger in %s: %w", path, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO cost_schema (version) VALUES (?)`, SchemaVersion); err != nil {
		return fmt.Errorf("cost: create the ledger in %s: %w", path, err)
	}
	return tx.Commit()
}

// recover closes the intervals left open as ending between the last alive
// mark (never before their start) and now.
func (l *Ledger) recover(ctx context.Context) (int, error) {
	tx, err := l.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("cost: recover %s: %w", l.path, err)
	}
	defer tx.Rollback()
	now := l.now().UnixNano()
	var alive sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT at_ns FROM alive WHERE id = 1`).Scan(&alive); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("cost: recover %s: %w", l.path, err)
	}
	res, err := tx.ExecContext(ctx, `UPDATE intervals SET end_ns = min(max(start_ns, ?), ?), end_unknown = 1, end_max_ns = max(start_ns, ?)
		WHERE end_ns IS NULL`, alive.Int64, now, now)
	if err != nil {
		return 0, fmt.Errorf("cost: recover %s: %w", l.path, err)
	}
	n, _ := res.RowsAffected()
	if _, err := tx.ExecContext(ctx, `INSERT INTO starts (at_ns, recovered) VALUES (?, ?)`, now, n); err != nil {
		return 0, fmt.Errorf("cost: recover %s: %w", l.path, err)
	}
	if err := l.markAlive(ctx, tx, now); err != nil {
		return 0, fmt.Errorf("cost: recover %s: %w", l.path, err)
	}
	return int(n), tx.Commit()
}

// markAlive records that the writer was alive at at: the ledger's one mark
// in SQLite, this writer's own in PostgreSQL.
func (l *Ledger) markAlive(ctx context.Context, tx *sql.Tx, at int64) error {
	if l.pg {
		_, err := tx.ExecContext(ctx, `INSERT INTO writers (writer, started_ns, alive_ns) VALUES ($1, $2, $2)
			ON CONFLICT (writer) DO UPDATE SET alive_ns = greatest(writers.alive_ns, excluded.alive_ns)`, l.writer, at)
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO alive (id, at_ns) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET at_ns = max(at_ns, excluded.at_ns)`, at)
	return err
}

// Recovered is how many intervals OpenLedger found open and closed as
// ending at an unknown time (in PostgreSQL: those of writers dead by then).
func (l *Ledger) Recovered() int { return l.recovered }

// Path is the ledger's file (in PostgreSQL: host:port/database).
func (l *Ledger) Path() string { return l.path }

// Enter records that e.SandboxID is in e.State from e.At on; the state it
// was in (if any) ends then.
// An entry without a sandbox id or with an unknown state is dropped and
// counted as a gap (it never spoils the commit of the others).
func (l *Ledger) Enter(e Entry) {
	if e.At.IsZero() {
		e.At = l.now()
	}
	if !e.State.valid() || e.SandboxID == "" {
		l.mu.Lock()
		l.dropped++
		l.mu.Unlock()
		return
	}
	l.tally(e.SandboxID, &poolState{e.Pool, e.State}, e.At)
	l.push(event{entry: &e, at: e.At})
}

// Observe records that e.SandboxID is in e.State since e.At as an
// authority outside the runtime tells it (a cluster's own timestamps),
// repeat-safe: when the sandbox's latest interval in the file is this very
// one (same state and start; a runtime restarted and closed it as ended at
// an unknown time) it is reopened, not counted twice; otherwise it is
// Enter. e.At is required.
func (l *Ledger) Observe(e Entry) {
	if !e.State.valid() || e.SandboxID == "" || e.At.IsZero() {
		l.mu.Lock()
		l.dropped++
		l.mu.Unlock()
		return
	}
	l.tally(e.SandboxID, &poolState{e.Pool, e.State}, later(e.At, l.opened))
	l.push(event{entry: &e, at: e.At, seen: true})
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Leave records that sandbox id is gone (deleted) at at.
func (l *Ledger) Leave(id string, at time.Time) {
	if at.IsZero() {
		at = l.now()
	}
	l.tally(id, nil, at)
	l.push(event{leave: id, at: at})
}

// Sample records how many bytes each sandbox of us keeps on disk at at,
// each sample standing for the period until the next one.
func (l *Ledger) Sample(us []Usage, at time.Time, period time.Duration) {
	if len(us) == 0 || period <= 0 {
		return
	}
	l.push(event{usage: us, at: at, period: min(period, maxPeriod)})
}

func (l *Ledger) push(e event) {
	l.mu.Lock()
	if len(l.queue) >= maxQueue {
		l.dropped++
		l.seq++
		l.done++ // never to be written: nobody waits for it
	} else {
		l.queue = append(l.queue, e)
		l.seq++
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Flush waits until every event queued before it is committed, and
// returns the last commit error, if any.
func (l *Ledger) Flush(ctx context.Context) error {
	l.mu.Lock()
	target := l.seq
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	stop := context.AfterFunc(ctx, func() { l.mu.Lock(); l.flushed.Broadcast(); l.mu.Unlock() })
	defer stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.done < target && ctx.Err() == nil {
		select {
		case <-l.stopped:
			return fmt.Errorf("cost: ledger %s is closed", l.path)
		default:
		}
		l.flushed.Wait()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.lastErr
}

// Close commits what is queued and closes the file. Intervals still open
// stay open: the next OpenLedger closes them as unknown, unless LeaveAll
// closed them first.
// Close is repeat-safe.
func (l *Ledger) Close() error {
	l.closing.Do(func() {
		close(l.stop)
		<-l.stopped
		l.mu.Lock()
		err := l.lastErr
		l.mu.Unlock()
		l.closeErr = errors.Join(err, l.w.Close())
	})
	return l.closeErr
}

// LeaveAll records that every sandbox with an open interval is gone at at
// (a runtime that deleted all its sandboxes when it stopped), and waits
// for the commit. In PostgreSQL: every sandbox whose open interval this
// writer keeps, never another's.
func (l *Ledger) LeaveAll(ctx context.Context, at time.Time) error {
	if err := l.Flush(ctx); err != nil {
		return err
	}
	query, args := `UPDATE intervals SET end_ns = greatest(start_ns, ?) WHERE end_ns IS NULL`, []any{at.UnixNano()}
	if l.pg {
		query, args = query+` AND writer = ?`, append(args, l.writer)
	}
	if _, err := l.w.ExecContext(ctx, l.q(query), args...); err != nil {
		return fmt.Errorf("cost: ledger %s: %w", l.path, err)
	}
	return nil
}

func (l *Ledger) run() {
	defer close(l.stopped)
	alive := time.NewTicker(l.aliveEvery)
	defer alive.Stop()
	for {
		stopping := false
		select {
		case <-l.wake:
		case <-alive.C:
			if l.pg { // a writer that died while this one lives: its intervals end
				// (an error is tried again next tick; a failing database
				// fails the commit below too, which Flush reports)
				_, _ = l.recoverDead(context.Background(), false)
			}
		case <-l.stop:
			stopping = true
		}
		l.mu.Lock()
		batch, dropped := l.queue, l.dropped
		l.queue, l.dropped = nil, 0
		l.mu.Unlock()
		err := l.commit(batch, dropped)
		l.mu.Lock()
		l.done += uint64(len(batch))
		if err != nil {
			l.lastErr = err
			l.dropped += len(batch) // lost: the next commit records the gap
		}
		l.flushed.Broadcast()
		l.mu.Unlock()
		if stopping {
			return
		}
	}
}

// commit writes batch (and the count of events dropped before it) in one
// transaction, and marks the ledger alive.
func (l *Ledger) commit(batch []event, dropped int) error {
	ctx := context.Background()
	tx, err := l.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("cost: ledger %s: %w", l.path, err)
	}
	defer tx.Rollback()
	if err := l.lock(ctx, tx); err != nil {
		return fmt.Errorf("cost: ledger %s: %w", l.path, err)
	}
	for _, e := range batch {
		if err := l.apply(ctx, tx, e); err != nil {
			return fmt.Errorf("cost: ledger %s: %w", l.path, err)
		}
	}
	now := l.now().UnixNano()
	if dropped > 0 {
		if err := l.gap(ctx, tx, now, dropped); err != nil {
			return fmt.Errorf("cost: ledger %s: %w", l.path, err)
		}
	}
	if err := l.markAlive(ctx, tx, now); err != nil {
		return fmt.Errorf("cost: ledger %s: %w", l.path, err)
	}
	return tx.Commit()
}

// gap records that events were dropped at at.
func (l *Ledger) gap(ctx context.Context, tx *sql.Tx, at int64, events int) error {
	if l.pg {
		_, err := tx.ExecContext(ctx, `INSERT INTO gaps (at_ns, events, writer) VALUES ($1, $2, $3)`, at, events, l.writer)
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO gaps (at_ns, events) VALUES (?, ?)`, at, events)
	return err
}

func (l *Ledger) apply(ctx context.Context, tx *sql.Tx, e event) error {
	at := e.at.UnixNano()
	switch {
	case e.entry != nil:
		en := e.entry
		if e.seen {
			// in PostgreSQL the interval is this writer's to keep from now on
			set, args := ``, []any{en.SandboxID, string(en.State), at}
			if l.pg {
				set, args = `, writer = ?`, append([]any{l.writer}, args...)
			}
			res, err := tx.ExecContext(ctx, l.q(`UPDATE intervals SET end_ns = NULL, end_unknown = 0, end_max_ns = NULL`+set+`
				WHERE id = (SELECT max(id) FROM intervals WHERE sandbox_id = ?) AND state = ? AND start_ns = ?`), args...)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n > 0 {
				return nil
			}
		}
		if _, err := tx.ExecContext(ctx, l.q(`UPDATE intervals SET end_ns = greatest(start_ns, ?) WHERE sandbox_id = ? AND end_ns IS NULL`), at, en.SandboxID); err != nil {
			return err
		}
		cols, vals, args := `pool, generation, sandbox_id, state, run_id, start_ns`, `?, ?, ?, ?, ?, ?`, []any{en.Pool, en.Generation, en.SandboxID, string(en.State), en.RunID, at}
		if l.pg {
			cols, vals, args = cols+`, writer`, vals+`, ?`, append(args, l.writer)
		}
		_, err := tx.ExecContext(ctx, l.q(`INSERT INTO intervals (`+cols+`) VALUES (`+vals+`)`), args...)
		return err
	case e.leave != "":
		_, err := tx.ExecContext(ctx, l.q(`UPDATE intervals SET end_ns = greatest(start_ns, ?) WHERE sandbox_id = ? AND end_ns IS NULL`), at, e.leave)
		return err
	default:
		for _, u := range e.usage {
			if _, err := tx.ExecContext(ctx, l.q(`INSERT INTO storage_samples (pool, generation, sandbox_id, at_ns, period_ns, bytes) VALUES (?, ?, ?, ?, ?, ?)`),
				u.Pool, u.Generation, u.SandboxID, at, int64(e.period), max(u.Bytes, 0)); err != nil {
				return err
			}
		}
		return nil
	}
}
