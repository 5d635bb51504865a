package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// LimitError refuses a submission over a bound: the queue's, the tenant's
// queue bound or its budget. The API answers 429 with Retry-After.
type LimitError struct {
	// Reason is queue_full, tenant_queue_full or budget.
	Reason     string
	Detail     string
	RetryAfter time.Duration
}

func (e *LimitError) Error() string { return e.Reason + ": " + e.Detail }

// Submission is one job to store with the bounds it must fit in.
type Submission struct {
	Job         *controlapi.Job
	Hash        string
	TenantBound int
	GlobalBound int
	// Budget < 0: the tenant has none.
	Budget      float64
	PeriodStart time.Time
	Profile     []byte
	// Admit, when set, admits in the submission's transaction what its
	// job lets in: no later transaction, no wake-up between submission
	// and admission.
	Admit *BatchAdmit
	// Token, when set, is the id of the token the submission came with,
	// its revocation not yet read: the transaction refuses the
	// submission (ErrUnauthenticated) unless the token is live.
	Token string
}

// BatchAdmit is admission run inside a group commit.
type BatchAdmit struct {
	Slots  Slots
	Limits map[string]TenantLimit
	Decide func(*controlapi.Job, *Lease)
	// After gets the admitted jobs once the transaction committed.
	After func([]*controlapi.Job)
}

// Lease is the columns beside a job's document that say who works it.
type Lease struct {
	Owner       string
	Until       time.Time
	DispatchDue time.Time
	// Grant is the runtime's fencing token of the job's claim: a runtime
	// credential, stored, never shown.
	Grant string
}

func isUniqueViolation(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "UNIQUE constraint failed") || strings.Contains(err.Error(), "SQLSTATE 23505"))
}

// insertOne stores a new job in tx, or returns the job stored under the
// same idempotency key. Its refusals (*LimitError, ErrConflict) leave
// nothing written; any other error spoils tx.
func (s *Store) insertOne(ctx context.Context, tx *sql.Tx, sub Submission) (*controlapi.Job, error) {
	j := sub.Job
	if sub.Token != "" {
		live, err := s.liveOf(ctx, tx, []string{sub.Token})
		if err != nil {
			return nil, err
		}
		if !live[sub.Token] {
			return nil, ErrUnauthenticated
		}
	}
	var doc, hash string
	err := tx.QueryRowContext(ctx, s.d.q(`SELECT doc, request_hash FROM cp_jobs WHERE tenant = ? AND idem_key = ?`),
		j.Tenant, j.IdempotencyKey).Scan(&doc, &hash)
	if err == nil {
		e, err := scanJob(doc)
		if err != nil {
			return nil, err
		}
		if hash != sub.Hash {
			return nil, fmt.Errorf("%w: idempotency key %q was used for a different request (job %s)", ErrConflict, j.IdempotencyKey, e.ID)
		}
		return e, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	if _, err := s.exec(ctx, tx, `INSERT INTO cp_tenants (tenant) VALUES (?) ON CONFLICT (tenant) DO NOTHING`, j.Tenant); err != nil {
		return nil, err
	}
	if sub.Budget >= 0 {
		p := sub.PeriodStart.UnixNano()
		if _, err := s.exec(ctx, tx, `UPDATE cp_tenants SET spent = CASE WHEN period_ns < ? THEN 0 ELSE spent END,
			period_ns = CASE WHEN period_ns < ? THEN ? ELSE period_ns END WHERE tenant = ?`, p, p, p, j.Tenant); err != nil {
			return nil, err
		}
	}
	// The plane's row first, then the tenant's: every transaction takes
	// them in this order (no deadlock on PostgreSQL).
	n, err := s.exec(ctx, tx, `UPDATE cp_plane SET queued = queued + 1 WHERE id = 1 AND queued < ?`, sub.GlobalBound)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, &LimitError{Reason: "queue_full", RetryAfter: 5 * time.Second,
			Detail: fmt.Sprintf("the control plane's queue holds its bound of %d jobs", sub.GlobalBound)}
	}
	if n, err = s.exec(ctx, tx, `UPDATE cp_tenants SET queued = queued + 1, reserved = reserved + ?
		WHERE tenant = ? AND queued < ? AND (? < 0 OR spent + reserved + ? <= ?)`,
		j.Cost.WorstCase, j.Tenant, sub.TenantBound, sub.Budget, j.Cost.WorstCase, sub.Budget); err != nil {
		return nil, err
	}
	if n == 0 {
		if _, err := s.exec(ctx, tx, `UPDATE cp_plane SET queued = queued - 1 WHERE id = 1`); err != nil {
			return nil, err
		}
		return nil, s.explainRefusal(ctx, tx, sub)
	}
	jdoc, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	if _, err := s.exec(ctx, tx, `INSERT INTO cp_jobs (id, tenant, idem_key, request_hash, pool, state, created_ns, worst_case, doc)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, j.ID, j.Tenant, j.IdempotencyKey, sub.Hash, j.Pool, string(j.State),
		j.CreatedAt.UnixNano(), j.Cost.WorstCase, string(jdoc)); err != nil {
		return nil, err
	}
	if _, err := s.exec(ctx, tx, `INSERT INTO cp_profiles (digest, name, revision, path, raw) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (digest) DO NOTHING`, j.Profile.Digest, j.Profile.Name, j.Profile.Revision, j.Profile.Path, string(sub.Profile)); err != nil {
		return nil, err
	}
	return nil, s.addTransition(ctx, tx, j.ID, j.State, "submitted", j.CreatedAt)
}

// refusal says an error of insertOne refuses its submission only.
func refusal(err error) bool {
	var le *LimitError
	return errors.As(err, &le) || errors.Is(err, ErrConflict) || errors.Is(err, ErrUnauthenticated)
}

// insertAlone stores one submission in a transaction of its own.
func (s *Store) insertAlone(ctx context.Context, sub Submission) (*controlapi.Job, bool, error) {
	for try := 0; ; try++ {
		var existing *controlapi.Job
		var refused error
		err := s.tx(ctx, func(tx *sql.Tx) error {
			var err error
			refused = nil
			existing, err = s.insertOne(ctx, tx, sub)
			if refusal(err) {
				refused = err
				return nil
			}
			return err
		})
		switch {
		case err == nil && refused != nil:
			return nil, false, refused
		case err == nil && existing != nil:
			return existing, false, nil
		case err == nil:
			return sub.Job, true, nil
		case isUniqueViolation(err) && try == 0:
			continue // a concurrent submit with the same key won: read it
		}
		return nil, false, err
	}
}

func (s *Store) explainRefusal(ctx context.Context, tx *sql.Tx, sub Submission) error {
	var queued int
	var reserved, spent float64
	if err := tx.QueryRowContext(ctx, s.d.q(`SELECT queued, reserved, spent FROM cp_tenants WHERE tenant = ?`), sub.Job.Tenant).
		Scan(&queued, &reserved, &spent); err != nil {
		return err
	}
	if queued >= sub.TenantBound {
		return &LimitError{Reason: "tenant_queue_full", RetryAfter: 2 * time.Second,
			Detail: fmt.Sprintf("tenant %s has %d queued jobs, its queue bound is %d", sub.Job.Tenant, queued, sub.TenantBound)}
	}
	return budgetRefusal(sub, spent, reserved)
}

// errSkip, returned by an update's function, leaves the job as it was.
var ErrSkip = errors.New("control: unchanged")

// class groups states by what they hold of a tenant's counters.
func class(s controlapi.State) int {
	switch {
	case s == controlapi.Queued:
		return 0
	case IsActive(s):
		return 1
	}
	return 2 // terminal or unknown: holds nothing
}

// The statements of a job's update, admission and counters (hot: prepared
// on SQLite).
var (
	selJobLease     = hot(`SELECT doc, lease_owner, lease_until_ns, dispatch_due_ns, grant_token FROM cp_jobs WHERE id = ?`)
	updJobLease     = hot(`UPDATE cp_jobs SET doc = ?, state = ?, lease_owner = ?, lease_until_ns = ?, dispatch_due_ns = ?, grant_token = ? WHERE id = ?`)
	updJobAdmit     = hot(`UPDATE cp_jobs SET doc = ?, state = ?, dispatch_due_ns = ? WHERE id = ? AND state = ?`)
	selTenantCounts = hot(`SELECT tenant, queued, active, last_admit_ns FROM cp_tenants`)
	selQueuedOf     = hot(`SELECT doc FROM cp_jobs WHERE tenant = +? AND state = +? ORDER BY created_ns, id LIMIT +?`)
	updPlaneDequeue = hot(`UPDATE cp_plane SET queued = queued - 1 WHERE id = 1`)
	updTenantAdmit  = hot(`UPDATE cp_tenants SET queued = queued - 1, active = active + 1, last_admit_ns = ? WHERE tenant = ?`)
	updTenantDrop   = hot(`UPDATE cp_tenants SET queued = queued - 1, reserved = reserved - ? WHERE tenant = ?`)
	updTenantEnd    = hot(`UPDATE cp_tenants SET active = active - 1, reserved = reserved - ?, spent = spent + ?, unknown_cost = unknown_cost + ? WHERE tenant = ?`)
)

// Update reads the job (locked), lets f change it and its lease, writes
// both and the tenant's counters, and records a transition when the state
// changed. f returning errSkip leaves everything as it was (nil job).
func (s *Store) Update(ctx context.Context, id string, f func(*controlapi.Job, *Lease) error) (*controlapi.Job, error) {
	return s.UpdateAdmit(ctx, id, f, nil)
}

// UpdateAdmit is update that, when the change frees a slot (an active job
// ends), admits what the slot lets in within the same transaction (ba's
// after gets the admitted once committed): one transaction where a finish
// and a wake-up's admission would take two. On PostgreSQL it takes
// admission's lock first, as every admitter does.
func (s *Store) UpdateAdmit(ctx context.Context, id string, f func(*controlapi.Job, *Lease) error, ba *BatchAdmit) (*controlapi.Job, error) {
	var out *controlapi.Job
	var admitted []*controlapi.Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		out, admitted = nil, nil
		if ba != nil && s.d.lockStmt != "" {
			if _, err := tx.ExecContext(ctx, s.d.lockStmt); err != nil {
				return err
			}
		}
		lock := ""
		if s.d.name == "postgres" {
			lock = " FOR UPDATE"
		}
		var doc, owner, grant string
		var until, due int64
		err := s.queryRow(ctx, tx, selJobLease+lock, id).Scan(&doc, &owner, &until, &due, &grant)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("job %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		j, err := scanJob(doc)
		if err != nil {
			return err
		}
		old := j.State
		l := Lease{Owner: owner, Until: time.Unix(0, until), DispatchDue: time.Unix(0, due), Grant: grant}
		if old.Terminal() {
			return fmt.Errorf("%w: job %s is %s", ErrConflict, id, old)
		}
		if err := f(j, &l); err != nil {
			return err
		}
		now := time.Now()
		if err := s.account(ctx, tx, j, old, now); err != nil {
			return err
		}
		b, err := json.Marshal(j)
		if err != nil {
			return err
		}
		if _, err := s.exec(ctx, tx, updJobLease, string(b), string(j.State), l.Owner, l.Until.UnixNano(), l.DispatchDue.UnixNano(), l.Grant, id); err != nil {
			return err
		}
		if j.State != old {
			reason := j.Reason
			if j.Detail != "" {
				reason = strings.TrimPrefix(reason+": "+j.Detail, ": ")
			}
			if err := s.addTransition(ctx, tx, id, j.State, reason, now); err != nil {
				return err
			}
		}
		out = j
		if ba != nil && class(old) == 1 && class(j.State) == 2 {
			admitted, err = s.admitTx(ctx, tx, ba.Slots, ba.Limits, ba.Decide)
			return err
		}
		return nil
	})
	if errors.Is(err, ErrSkip) {
		return nil, nil
	}
	if err == nil && len(admitted) > 0 && ba.After != nil {
		ba.After(admitted)
	}
	return out, err
}

// account moves the tenant's counters for a change of state.
func (s *Store) account(ctx context.Context, tx *sql.Tx, j *controlapi.Job, old controlapi.State, now time.Time) error {
	from, to := class(old), class(j.State)
	if from == to {
		return nil
	}
	unknownCost := 0
	if !j.Cost.Known {
		unknownCost = 1
	}
	var err error
	switch {
	case from == 0 && to == 1:
		_, err = s.exec(ctx, tx, updPlaneDequeue)
		if err == nil {
			_, err = s.exec(ctx, tx, updTenantAdmit, now.UnixNano(), j.Tenant)
		}
	case from == 0 && to == 2:
		_, err = s.exec(ctx, tx, updPlaneDequeue)
		if err == nil {
			_, err = s.exec(ctx, tx, updTenantDrop, j.Cost.WorstCase, j.Tenant)
		}
	case from == 1 && to == 2:
		_, err = s.exec(ctx, tx, updTenantEnd, j.Cost.WorstCase, j.Cost.Amount, unknownCost, j.Tenant)
	default:
		return fmt.Errorf("control: job %s: no move from %s to %s", j.ID, old, j.State)
	}
	return err
}

// Slots is the plane's capacity for admission: at most max jobs active;
// the last reserve of them are not taken by a tenant at or over its fair
// share (Config.Reserve).
type Slots struct {
	Max, Reserve int
}

// shareWindow: a tenant that was admitted a job this recently counts among
// those sharing the slots, even with nothing active or queued.
const shareWindow = time.Minute

// TenantLimit is what admission needs of a tenant's configuration.
type TenantLimit struct {
	Concurrency int
}

// Admit moves queued jobs to admitted while the plane and each tenant have
// room, fairly: the next slot goes to the tenant with the fewest active
// jobs that has one queued, the longest-waiting such tenant first. decide
// sets the admitted job's fields (or refuses it); it runs inside the
// transaction.
func (s *Store) Admit(ctx context.Context, sl Slots, limits map[string]TenantLimit, decide func(*controlapi.Job, *Lease)) ([]*controlapi.Job, error) {
	var out []*controlapi.Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if s.d.lockStmt != "" {
			if _, err := tx.ExecContext(ctx, s.d.lockStmt); err != nil {
				return err
			}
		}
		var err error
		out, err = s.admitTx(ctx, tx, sl, limits, decide)
		return err
	})
	return out, err
}

// admitTx is admit in tx, whose caller took admission's lock (PostgreSQL)
// before any row's, as every admitter does.
func (s *Store) admitTx(ctx context.Context, tx *sql.Tx, sl Slots, limits map[string]TenantLimit, decide func(*controlapi.Job, *Lease)) ([]*controlapi.Job, error) {
	var out []*controlapi.Job
	err := func() error {
		type cand struct {
			tenant       string
			queued       int
			active       int
			last         int64
			jobs         []*controlapi.Job
			fetched, end bool
		}
		rows, err := s.writeQuery(ctx, tx, selTenantCounts, nil)
		if err != nil {
			return err
		}
		var cs []*cand
		var sharing []int // the active jobs of each tenant with work
		total := 0
		recent := time.Now().Add(-shareWindow).UnixNano()
		for rows.Next() {
			c := &cand{}
			if err := rows.Scan(&c.tenant, &c.queued, &c.active, &c.last); err != nil {
				rows.Close()
				return err
			}
			total += c.active
			if c.queued > 0 {
				cs = append(cs, c)
			}
			if c.active > 0 || c.queued > 0 || c.last > recent {
				sharing = append(sharing, c.active)
			}
		}
		rows.Close()
		free := sl.Max - total
		share := (sl.Max + max(len(sharing), 1) - 1) / max(len(sharing), 1)
		// under counts the tenants with work below their share: a tenant
		// at or over it with a backlog (more queued than its concurrency
		// lets it start now: it floods) leaves a slot for each of them
		// (each may submit its next job at any moment and finds room at
		// once), and at least the fixed reserve. A tenant whose queue fits
		// its free concurrency (a burst) takes one slot beyond its share
		// from any free ones and leaves the reserve beyond that, so free
		// slots are not held idle while a tenant that does not flood
		// waits for its own.
		under := 0
		for _, a := range sharing {
			if a < share {
				under++
			}
		}
		for free > 0 {
			var best *cand
			for _, c := range cs {
				lim, known := limits[c.tenant]
				if c.end || (known && c.active >= lim.Concurrency) {
					continue
				}
				switch backlog := !known || c.queued > lim.Concurrency-c.active; {
				case c.active < share: // any free slot
				case backlog && free <= max(sl.Reserve, under):
					continue
				case !backlog && c.active > share && free <= sl.Reserve:
					continue
				}
				if best == nil || c.active < best.active || (c.active == best.active && c.last < best.last) {
					best = c
				}
			}
			if best == nil {
				break
			}
			if len(best.jobs) == 0 {
				if best.fetched && len(best.jobs) == 0 {
					best.end = true
					continue
				}
				// as many as best may be admitted now (one, mostly, when a
				// finish frees a slot), at most 16 per read
				n := min(16, free)
				if lim, known := limits[best.tenant]; known {
					n = min(n, lim.Concurrency-best.active)
				}
				js, err := s.queuedOf(ctx, tx, best.tenant, max(n, 1))
				if err != nil {
					return err
				}
				best.jobs, best.fetched = js, len(js) < max(n, 1)
				if len(js) == 0 {
					best.end = true
					continue
				}
			}
			j := best.jobs[0]
			best.jobs = best.jobs[1:]
			if len(best.jobs) == 0 && !best.fetched {
				best.jobs = nil
			}
			best.last = time.Now().UnixNano()
			old := j.State
			l := Lease{}
			decide(j, &l)
			if err := s.account(ctx, tx, j, old, time.Now()); err != nil {
				return err
			}
			b, err := json.Marshal(j)
			if err != nil {
				return err
			}
			if _, err := s.exec(ctx, tx, updJobAdmit, string(b), string(j.State), l.DispatchDue.UnixNano(), j.ID, string(controlapi.Queued)); err != nil {
				return err
			}
			reason := j.Reason
			if j.Detail != "" && j.State != controlapi.Admitted {
				reason += ": " + j.Detail
			}
			if err := s.addTransition(ctx, tx, j.ID, j.State, reason, time.Now()); err != nil {
				return err
			}
			best.queued-- // admitted or refused, it left the queue
			if j.State == controlapi.Admitted {
				if best.active+1 == share {
					under-- // best reached its share
				}
				best.active++
				free--
				out = append(out, j)
			}
		}
		return nil
	}()
	return out, err
}

// Admissible says, from a read (no write lock), whether admit could admit
// anything: the plane has a free slot and a tenant with a queued job has
// room.
func (s *Store) Admissible(ctx context.Context, maxActive int, limits map[string]TenantLimit) (bool, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT tenant, queued, active FROM cp_tenants`)
	if err != nil {
		return false, Unavailable(err)
	}
	defer rows.Close()
	total, candidate := 0, false
	for rows.Next() {
		var t string
		var queued, active int
		if err := rows.Scan(&t, &queued, &active); err != nil {
			return false, err
		}
		total += active
		if lim, known := limits[t]; queued > 0 && (!known || active < lim.Concurrency) {
			candidate = true
		}
	}
	return candidate && total < maxActive, rows.Err()
}

// QueuedByTenant reads each tenant's count of queued jobs (stored, not yet
// admitted) from the counters admission keeps, without a write lock.
func (s *Store) QueuedByTenant(ctx context.Context) (map[string]int64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT tenant, queued FROM cp_tenants`)
	if err != nil {
		return nil, Unavailable(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var t string
		var n int64
		if err := rows.Scan(&t, &n); err != nil {
			return nil, err
		}
		out[t] = n
	}
	return out, rows.Err()
}

func (s *Store) queuedOf(ctx context.Context, tx *sql.Tx, tenant string, n int) ([]*controlapi.Job, error) {
	rows, err := s.writeQuery(ctx, tx, selQueuedOf, []any{tenant, string(controlapi.Queued), n})
	if err != nil {
		return nil, err
	}
	return scanJobs(rows)
}

// Heartbeat extends the owner's lease; false when the owner lost it.
func (s *Store) Heartbeat(ctx context.Context, id, owner string, until time.Time) (bool, error) {
	res, err := s.w.ExecContext(ctx, s.d.q(`UPDATE cp_jobs SET lease_until_ns = ? WHERE id = ? AND lease_owner = ?`), until.UnixNano(), id, owner)
	if err != nil {
		return false, Unavailable(err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Orphans lists jobs whose owner's lease expired (allocating or running),
// and admitted jobs whose dispatch is overdue.
func (s *Store) Orphans(ctx context.Context, now time.Time, limit int) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, s.d.q(fmt.Sprintf(`SELECT id FROM cp_jobs WHERE
		(state IN ('allocating', 'running', 'canceling') AND lease_until_ns < ?) OR
		(state = 'admitted' AND dispatch_due_ns < ? AND lease_until_ns < ?) LIMIT %d`, limit)), now.UnixNano(), now.UnixNano(), now.UnixNano())
	if err != nil {
		return nil, Unavailable(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

func budgetRefusal(sub Submission, spent, reserved float64) *LimitError {
	c := sub.Job.Cost
	return &LimitError{Reason: "budget", RetryAfter: time.Hour,
		Detail: fmt.Sprintf("the job's worst case %.4f %s (deadline %s at %.4f/h) does not fit tenant %s's budget of %.4f %s for the period from %s: spent %.4f, reserved by queued and running jobs %.4f",
			c.WorstCase, c.Currency, time.Duration(sub.Job.Limits.Deadline), c.RatePerHour, sub.Job.Tenant, sub.Budget, c.Currency,
			sub.PeriodStart.UTC().Format(time.RFC3339), spent, reserved)}
}

// queuesSeen keeps the queued counts a committed submission batch left.
func (s *Store) queuesSeen(c queueCounts) {
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	if s.seen.tenants == nil {
		s.seen.tenants = map[string]int{}
	}
	s.seen.plane = c.plane
	for t, n := range c.tenants {
		s.seen.tenants[t] = n
	}
}

// FarFromBounds says whether the last committed batch left the plane's
// and sub's tenant's queues under half their bounds: then overBound's
// read is skipped (it only refuses early what the batch, which reads the
// counters in its transaction, refuses anyway; other replicas' batches
// may have added since, and that batch still sees them).
func (s *Store) FarFromBounds(sub Submission) bool {
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	tq, ok := s.seen.tenants[sub.Job.Tenant]
	return ok && 2*s.seen.plane < sub.GlobalBound && 2*tq < sub.TenantBound
}

// OverBound says, from reads only (no write lock), that a submission
// would be refused for a full queue: its tenant's or the plane's queue is
// at its bound and its key names no stored job. A flood of refused
// submissions then never queues for the writer; the transaction's own
// check stays the authority.
func (s *Store) OverBound(ctx context.Context, sub Submission) *LimitError {
	if s.FarFromBounds(sub) {
		return nil
	}
	var tq, pq int
	var row *sql.Row
	if s.boundsStmt != nil {
		row = s.boundsStmt.QueryRowContext(ctx, sub.Job.Tenant)
	} else {
		row = s.r.QueryRowContext(ctx, s.d.q(selBounds), sub.Job.Tenant)
	}
	if err := row.Scan(&tq, &pq); err != nil {
		return nil
	}
	if tq < sub.TenantBound && pq < sub.GlobalBound {
		return nil
	}
	var n int
	if err := s.r.QueryRowContext(ctx, s.d.q(`SELECT COUNT(*) FROM cp_jobs WHERE tenant = ? AND idem_key = ?`), sub.Job.Tenant, sub.Job.IdempotencyKey).Scan(&n); err != nil || n > 0 {
		return nil
	}
	if pq >= sub.GlobalBound {
		return &LimitError{Reason: "queue_full", RetryAfter: 5 * time.Second,
			Detail: fmt.Sprintf("the control plane's queue holds its bound of %d jobs", sub.GlobalBound)}
	}
	return &LimitError{Reason: "tenant_queue_full", RetryAfter: 2 * time.Second,
		Detail: fmt.Sprintf("tenant %s has %d queued jobs, its queue bound is %d", sub.Job.Tenant, tq, sub.TenantBound)}
}

// IsActive says a job in state s holds (or is about to hold) a slot of its
// tenant's concurrency.
func IsActive(s controlapi.State) bool {
	return s == controlapi.Admitted || s == controlapi.Allocating || s == controlapi.Running || s == controlapi.Canceling
}
