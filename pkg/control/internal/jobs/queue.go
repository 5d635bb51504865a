package jobs

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
)

// DispatchArgs is River's job: dispatch one admitted control-plane job to
// a runtime. River carries it durably, runs it on a bounded pool of
// workers, retries a failed dispatch with backoff up to the attempt budget,
// and rescues it when a worker died; which job may run is Slipway's
// (admission), and the job's own state machine makes a second delivery
// harmless.
type DispatchArgs struct {
	JobID string `json:"job_id"`
}

// Kind names the River job kind.
func (DispatchArgs) Kind() string { return "slipway_dispatch" }

// queue is River, whichever its driver.
type queue interface {
	insert(ctx context.Context, jobID string) error
	insertMany(ctx context.Context, ids []string) error
	start(ctx context.Context) error
	stop(ctx context.Context) error
	close()
}

type riverQueue[TTx any] struct {
	c       *river.Client[TTx]
	cleanup func()
}

func (q *riverQueue[TTx]) insert(ctx context.Context, id string) error {
	_, err := q.c.Insert(ctx, DispatchArgs{JobID: id}, nil)
	return err
}

func (q *riverQueue[TTx]) insertMany(ctx context.Context, ids []string) error {
	ps := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		ps[i] = river.InsertManyParams{Args: DispatchArgs{JobID: id}}
	}
	_, err := q.c.InsertMany(ctx, ps)
	return err
}

func (q *riverQueue[TTx]) start(ctx context.Context) error { return q.c.Start(ctx) }
func (q *riverQueue[TTx]) stop(ctx context.Context) error  { return q.c.Stop(ctx) }
func (q *riverQueue[TTx]) close()                          { q.cleanup() }

// retryPolicy backs a failed dispatch off exponentially from 250 ms to 30 s,
// with jitter.
type retryPolicy struct{}

func (retryPolicy) NextRetry(j *rivertype.JobRow) time.Time {
	d := 250 * time.Millisecond << min(j.Attempt, 7)
	d = min(d, 30*time.Second)
	d += time.Duration(rand.Int64N(int64(d/4) + 1))
	return time.Now().Add(d)
}

// queueConfig is how River runs.
type queueConfig struct {
	workers     int
	maxAttempts int
	logger      *slog.Logger
	id          string
}

func riverConfig(c queueConfig, workers *river.Workers) *river.Config {
	rc := &river.Config{
		ID:                c.id,
		Logger:            c.logger,
		MaxAttempts:       c.maxAttempts,
		RetryPolicy:       retryPolicy{},
		JobTimeout:        -1, // the job's own deadline bounds it
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
		// A worker that died leaves its job running in River; Slipway's
		// recoverer redispatches the control-plane job by its lease, so
		// River's rescue only tidies River's own row.
		RescueStuckJobsAfter: 10 * time.Minute,
		TestOnly:             false,
	}
	if workers != nil {
		rc.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: c.workers}}
		rc.Workers = workers
	}
	return rc
}

// openQueue opens River on the store's database: on SQLite a file of its
// own beside the store's (riversqlite wants exactly one connection); on
// PostgreSQL the same database (schema slipway_queue). workers nil opens
// an insert-only client.
func openQueue(ctx context.Context, s *store.Store, c queueConfig, workers *river.Workers) (queue, error) {
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if strings.HasPrefix(s.DSN(), "sqlite:") {
		path := strings.TrimPrefix(s.DSN(), "sqlite:") + "-queue"
		db, err := sql.Open("sqlite", path+fmt.Sprintf("?_pragma=busy_timeout(%d)&_journal_mode=WAL&_txlock=immediate", store.BusyTimeoutMillis))
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		q, err := newRiver[*sql.Tx](ctx, riversqlite.New(db), c, workers, func() { db.Close() })
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("control: queue %s: %w", path, err)
		}
		return q, nil
	}
	cfg, err := pgxpool.ParseConfig(s.DSN())
	if err != nil {
		return nil, fmt.Errorf("control: queue: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = queueSchema
	cfg.MaxConns = int32(max(8, c.workers/2))
	admin, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("control: queue: %w", store.Unavailable(err))
	}
	_, err = admin.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+queueSchema)
	admin.Close(ctx)
	if err != nil {
		return nil, fmt.Errorf("control: queue: %w", store.Unavailable(err))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("control: queue: %w", store.Unavailable(err))
	}
	q, err := newRiver[pgx.Tx](ctx, riverpgxv5.New(pool), c, workers, pool.Close)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("control: queue: %w", store.Unavailable(err))
	}
	return q, nil
}

// queueSchema is River's PostgreSQL schema.
const queueSchema = "slipway_queue"

func newRiver[TTx any](ctx context.Context, d riverdriver.Driver[TTx], c queueConfig, workers *river.Workers, cleanup func()) (*riverQueue[TTx], error) {
	m, err := rivermigrate.New(d, &rivermigrate.Config{Logger: c.logger})
	if err != nil {
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	rc, err := river.NewClient(d, riverConfig(c, workers))
	if err != nil {
		return nil, err
	}
	return &riverQueue[TTx]{c: rc, cleanup: cleanup}, nil
}

// dispatchWorker is River's worker of DispatchArgs.
type dispatchWorker struct {
	river.WorkerDefaults[DispatchArgs]
	e *Engine
}

func (w *dispatchWorker) Timeout(*river.Job[DispatchArgs]) time.Duration { return -1 }

func (w *dispatchWorker) Work(ctx context.Context, j *river.Job[DispatchArgs]) error {
	return w.e.dispatch(ctx, j.Args.JobID, j.Attempt, j.MaxAttempts)
}

// Inserter is River's insert alone on s's database, the floor a submission
// is measured against (benchmark B8a): insertMany hands River a group of job
// ids in one InsertMany, as admission does with the jobs a group commit
// admitted; close closes the queue.
func Inserter(ctx context.Context, s *store.Store) (insertMany func(context.Context, []string) error, close func(), err error) {
	q, err := openQueue(ctx, s, queueConfig{workers: 1, maxAttempts: 5}, nil)
	if err != nil {
		return nil, nil, err
	}
	return q.insertMany, q.close, nil
}
