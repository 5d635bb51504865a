package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// insertBatch stores a group commit's submissions in tx with a fixed
// number of statements, whatever their count: it reads the keys already
// used, which of the submissions' unchecked tokens are live, the plane's
// and the tenants' counters (locked on PostgreSQL: the plane's row, then
// the tenants' in name order, as every transaction takes them), decides
// each submission in order in memory, and writes the counters' changes and
// the new rows with one statement each. Each submission gets its own
// outcome; a refusal writes nothing of it.
func (s *Store) insertBatch(ctx context.Context, tx *sql.Tx, batch []*pendingSubmit) ([]SubmitOutcome, queueCounts, error) {
	lock := ""
	if s.d.name == "postgres" {
		lock = " FOR UPDATE"
		if batch[0].In.Admit != nil && s.d.lockStmt != "" {
			// admission's lock before any row's, as the admitter takes them
			if _, err := tx.ExecContext(ctx, s.d.lockStmt); err != nil {
				return nil, queueCounts{}, err
			}
		}
	}
	keys := batchKeys(batch)
	stored, err := s.storedKeys(ctx, tx, keys)
	if err != nil {
		return nil, queueCounts{}, err
	}
	// The tokens whose revocation no one read yet: a submission whose
	// token is revoked is refused before anything of it is looked at.
	var tokens []string
	for _, p := range batch {
		if t := p.In.Token; t != "" && !slices.Contains(tokens, t) {
			tokens = append(tokens, t)
		}
	}
	live, err := s.liveOf(ctx, tx, tokens)
	if err != nil {
		return nil, queueCounts{}, err
	}
	bc, err := s.batchCounters(ctx, tx, keys, lock)
	if err != nil {
		return nil, queueCounts{}, err
	}
	outs, fresh, err := decideBatch(batch, stored, live, bc)
	if err != nil {
		return nil, queueCounts{}, err
	}
	seen := queueCounts{plane: bc.planeQueued + bc.planeDelta, tenants: make(map[string]int, len(bc.tenants))}
	for _, t := range bc.tenants {
		seen.tenants[t] = bc.cs[t].queued + bc.cs[t].dQueued
	}
	if len(fresh) == 0 {
		return outs, seen, nil
	}
	if err := s.writeBatch(ctx, tx, batch, fresh, bc); err != nil {
		return nil, queueCounts{}, err
	}
	return outs, seen, nil
}

// idemKey is a submission's idempotency key, per tenant.
type idemKey struct{ tenant, idem string }

// storedKey is what a stored job keeps of its submission: its record and
// the hash of the request.
type storedKey struct{ doc, hash string }

// batchKeys are the batch's idempotency keys, each once, in order.
func batchKeys(batch []*pendingSubmit) []idemKey {
	keys := make([]idemKey, 0, len(batch))
	seen := map[idemKey]bool{}
	for _, p := range batch {
		k := idemKey{p.In.Job.Tenant, p.In.Job.IdempotencyKey}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// storedKeys reads which of keys are stored already: with the prepared
// single-row lookup (SQLite), or one multi-row lookup per 200 keys
// (PostgreSQL: round trips).
func (s *Store) storedKeys(ctx context.Context, tx *sql.Tx, keys []idemKey) (map[idemKey]storedKey, error) {
	stored := map[idemKey]storedKey{}
	if s.rowStmts != nil {
		st := tx.StmtContext(ctx, s.rowStmts[selKey])
		for _, k := range keys {
			var v storedKey
			err := st.QueryRowContext(ctx, k.tenant, k.idem).Scan(&v.doc, &v.hash)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return nil, err
			}
			stored[k] = v
		}
		return stored, nil
	}
	for chunk := range slices.Chunk(keys, 200) {
		var args []any
		vals := make([]string, len(chunk))
		for i, k := range chunk {
			vals[i] = "(?, ?)"
			args = append(args, k.tenant, k.idem)
		}
		rows, err := tx.QueryContext(ctx, s.d.q(`SELECT tenant, idem_key, doc, request_hash FROM cp_jobs WHERE (tenant, idem_key) IN (VALUES `+strings.Join(vals, ", ")+`)`), args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var k idemKey
			var v storedKey
			if err := rows.Scan(&k.tenant, &k.idem, &v.doc, &v.hash); err != nil {
				rows.Close()
				return nil, err
			}
			stored[k] = v
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return stored, nil
}

// batchCounts are the counters a batch read and the changes it decided.
type batchCounts struct {
	planeQueued, planeDelta int
	// tenants are the batch's tenants in name order, cs their counters.
	tenants []string
	cs      map[string]*counters
}

// batchCounters reads the plane's counters, then the tenants' (their rows
// created first where missing: a tenant's first job), locked in name order
// on PostgreSQL.
func (s *Store) batchCounters(ctx context.Context, tx *sql.Tx, keys []idemKey, lock string) (*batchCounts, error) {
	bc := &batchCounts{}
	if err := s.queryRow(ctx, tx, selPlaneQueued+lock).Scan(&bc.planeQueued); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if !slices.Contains(bc.tenants, k.tenant) {
			bc.tenants = append(bc.tenants, k.tenant)
		}
	}
	slices.Sort(bc.tenants)
	cs, err := s.tenantCounters(ctx, tx, bc.tenants, lock)
	if err != nil {
		return nil, err
	}
	if len(cs) < len(bc.tenants) {
		ph := strings.TrimSuffix(strings.Repeat("(?), ", len(bc.tenants)), ", ")
		if _, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO cp_tenants (tenant) VALUES `+ph+` ON CONFLICT (tenant) DO NOTHING`), anys(bc.tenants)...); err != nil {
			return nil, err
		}
		if cs, err = s.tenantCounters(ctx, tx, bc.tenants, lock); err != nil {
			return nil, err
		}
	}
	bc.cs = cs
	return bc, nil
}

// decideBatch decides each submission in order, in memory: a revoked
// token, a key already stored or taken earlier in the batch (the same job,
// or a conflict), a bound or a budget, or a new job (fresh: the indexes
// of the new jobs). It counts the new jobs into bc.
func decideBatch(batch []*pendingSubmit, stored map[idemKey]storedKey, live map[string]bool, bc *batchCounts) ([]SubmitOutcome, []int, error) {
	outs := make([]SubmitOutcome, len(batch))
	taken := map[idemKey]int{} // key -> index of the batch's submission that holds it
	var fresh []int
	for i, p := range batch {
		sub := p.In
		j := sub.Job
		if sub.Token != "" && !live[sub.Token] {
			outs[i] = SubmitOutcome{Err: ErrUnauthenticated}
			continue
		}
		k := idemKey{j.Tenant, j.IdempotencyKey}
		if v, ok := stored[k]; ok {
			e, err := scanJob(v.doc)
			if err != nil {
				return nil, nil, err
			}
			if v.hash != sub.Hash {
				outs[i] = SubmitOutcome{Err: fmt.Errorf("%w: idempotency key %q was used for a different request (job %s)", ErrConflict, j.IdempotencyKey, e.ID)}
			} else {
				outs[i] = SubmitOutcome{Job: e}
			}
			continue
		}
		if first, ok := taken[k]; ok {
			switch {
			case batch[first].In.Hash != sub.Hash:
				outs[i] = SubmitOutcome{Err: fmt.Errorf("%w: idempotency key %q was used for a different request (job %s)", ErrConflict, j.IdempotencyKey, batch[first].In.Job.ID)}
			case outs[first].Err != nil:
				outs[i] = outs[first]
			default:
				outs[i] = SubmitOutcome{Job: batch[first].In.Job}
			}
			continue
		}
		taken[k] = i
		if outs[i] = admitToQueue(sub, bc); outs[i].Created {
			fresh = append(fresh, i)
		}
	}
	return outs, fresh, nil
}

// admitToQueue decides a new submission against the plane's and its
// tenant's queue bounds and its tenant's budget (rolled into a new period
// when one began), counting it into bc when it fits.
func admitToQueue(sub Submission, bc *batchCounts) SubmitOutcome {
	j := sub.Job
	c := bc.cs[j.Tenant]
	if sub.Budget >= 0 {
		if p := sub.PeriodStart.UnixNano(); c.period < p && (!c.rolled || c.newPeriod < p) {
			c.rolled, c.newPeriod, c.spent, c.period = true, p, 0, p
		}
	}
	wc := j.Cost.WorstCase
	switch {
	case bc.planeQueued+bc.planeDelta >= sub.GlobalBound:
		return SubmitOutcome{Err: &LimitError{Reason: "queue_full", RetryAfter: 5 * time.Second,
			Detail: fmt.Sprintf("the control plane's queue holds its bound of %d jobs", sub.GlobalBound)}}
	case c.queued+c.dQueued >= sub.TenantBound:
		return SubmitOutcome{Err: &LimitError{Reason: "tenant_queue_full", RetryAfter: 2 * time.Second,
			Detail: fmt.Sprintf("tenant %s has %d queued jobs, its queue bound is %d", j.Tenant, c.queued+c.dQueued, sub.TenantBound)}}
	case sub.Budget >= 0 && c.spent+c.reserved+c.dReserved+wc > sub.Budget:
		return SubmitOutcome{Err: budgetRefusal(sub, c.spent, c.reserved+c.dReserved)}
	}
	c.dQueued++
	c.dReserved += wc
	bc.planeDelta++
	return SubmitOutcome{Job: j, Created: true}
}

// writeBatch writes a batch's decisions: the counters' changes, each
// tenant's in one statement (a new budget period zeroes what the last one
// spent), then the new jobs' rows and the profiles not stored yet.
func (s *Store) writeBatch(ctx context.Context, tx *sql.Tx, batch []*pendingSubmit, fresh []int, bc *batchCounts) error {
	storedAt := time.Now().UTC()
	var w writes
	w.add(updPlaneQueued, bc.planeDelta)
	for _, t := range bc.tenants {
		c := bc.cs[t]
		if c.dQueued == 0 && !c.rolled {
			continue
		}
		if c.rolled {
			w.add(updTenantQueuedRoll, c.newPeriod, c.newPeriod, c.newPeriod, c.dQueued, c.dReserved, t)
		} else {
			w.add(updTenantQueued, c.dQueued, c.dReserved, t)
		}
	}
	profiles := map[string]Submission{}
	if s.rowStmts != nil {
		if err := w.exec(ctx, tx, s); err != nil {
			return err
		}
		w = writes{}
		if err := s.insertJobRows(ctx, tx, batch, fresh, storedAt, profiles); err != nil {
			return err
		}
	} else if err := s.addJobRows(&w, tx, batch, fresh, storedAt, profiles); err != nil {
		return err
	}
	s.addProfiles(&w, profiles)
	return w.exec(ctx, tx, s)
}

// insertJobRows writes each new job's rows with the prepared single-row
// inserts (SQLite: a statement parsed once costs less than a multi-row
// one parsed per batch), noting its profile in profiles.
func (s *Store) insertJobRows(ctx context.Context, tx *sql.Tx, batch []*pendingSubmit, fresh []int, storedAt time.Time, profiles map[string]Submission) error {
	for _, i := range fresh {
		sub := batch[i].In
		j := sub.Job
		j.CreatedAt = storedAt // its time in the queue starts with the transaction that stores it
		doc, err := json.Marshal(j)
		if err != nil {
			return err
		}
		data := MustJSON(controlapi.StateData{State: j.State, Reason: "submitted"})
		at := j.CreatedAt.UnixNano()
		for _, ins := range []struct {
			q    string
			args []any
		}{
			{insJob, []any{j.ID, j.Tenant, j.IdempotencyKey, sub.Hash, j.Pool, string(j.State), at, j.Cost.WorstCase, string(doc)}},
			{insTransition, []any{j.ID, at, string(j.State), "submitted"}},
			{insEventHead, []any{j.ID}},
			{insEvent, []any{j.ID, at, segmentLine(NewEvent{Kind: controlapi.KindState, Data: data}), len(data)}},
		} {
			if _, err := tx.StmtContext(ctx, s.rowStmts[ins.q]).ExecContext(ctx, ins.args...); err != nil {
				return err
			}
		}
		profiles[j.Profile.Digest] = sub
		s.ev.pending(tx, j.ID, nil)
	}
	return nil
}

// addJobRows adds the new jobs' rows to w as multi-row inserts of up to
// 100 jobs each (PostgreSQL: round trips), noting their profiles in
// profiles.
func (s *Store) addJobRows(w *writes, tx *sql.Tx, batch []*pendingSubmit, fresh []int, storedAt time.Time, profiles map[string]Submission) error {
	for chunk := range slices.Chunk(fresh, 100) {
		var jargs, targs, hargs, eargs []any
		jv := make([]string, len(chunk))
		tv := make([]string, len(chunk))
		hv := make([]string, len(chunk))
		ev := make([]string, len(chunk))
		for n, i := range chunk {
			sub := batch[i].In
			j := sub.Job
			j.CreatedAt = storedAt // its time in the queue starts with the transaction that stores it
			doc, err := json.Marshal(j)
			if err != nil {
				return err
			}
			at := j.CreatedAt.UnixNano()
			jv[n], tv[n] = "(?, ?, ?, ?, ?, ?, ?, ?, ?)", "(?, 1, ?, ?, ?)"
			jargs = append(jargs, j.ID, j.Tenant, j.IdempotencyKey, sub.Hash, j.Pool, string(j.State), at, j.Cost.WorstCase, string(doc))
			targs = append(targs, j.ID, at, string(j.State), "submitted")
			// Each new job's stream starts with its first state event (seq
			// 1), in the same transaction, as every transition's does.
			data := MustJSON(controlapi.StateData{State: j.State, Reason: "submitted"})
			hv[n], ev[n] = "(?, 1, 0, 0)", "(?, 1, 1, ?, 0, ?, ?)"
			hargs = append(hargs, j.ID)
			eargs = append(eargs, j.ID, at, segmentLine(NewEvent{Kind: controlapi.KindState, Data: data}), len(data))
			profiles[j.Profile.Digest] = sub
			s.ev.pending(tx, j.ID, nil)
		}
		w.add(`INSERT INTO cp_jobs (id, tenant, idem_key, request_hash, pool, state, created_ns, worst_case, doc) VALUES `+strings.Join(jv, ", "), jargs...)
		w.add(`INSERT INTO cp_transitions (job_id, seq, at_ns, state, reason) VALUES `+strings.Join(tv, ", "), targs...)
		w.add(`INSERT INTO cp_event_heads (job_id, last_seq, output_bytes, ended) VALUES `+strings.Join(hv, ", "), hargs...)
		w.add(`INSERT INTO cp_event_segments (job_id, last_seq, first_seq, at_ns, output, events, size) VALUES `+strings.Join(ev, ", "), eargs...)
	}
	return nil
}

// addProfiles adds to w the profiles of profiles this store has not
// stored yet.
func (s *Store) addProfiles(w *writes, profiles map[string]Submission) {
	var pargs []any
	var pv []string
	for digest, sub := range profiles {
		if _, ok := s.storedProfiles.Load(digest); ok {
			continue
		}
		pr := sub.Job.Profile
		pv = append(pv, "(?, ?, ?, ?, ?)")
		pargs = append(pargs, pr.Digest, pr.Name, pr.Revision, pr.Path, string(sub.Profile))
	}
	if len(pv) > 0 {
		w.add(`INSERT INTO cp_profiles (digest, name, revision, path, raw) VALUES `+strings.Join(pv, ", ")+` ON CONFLICT (digest) DO NOTHING`, pargs...)
	}
}

// queueCounts are the queued counts a submission batch read and left:
// the plane's and each of its tenants'.
type queueCounts struct {
	plane   int
	tenants map[string]int
}

// counters are a tenant's counters as a batch reads and changes them.
type counters struct {
	queued          int
	reserved, spent float64
	period          int64
	dQueued         int
	dReserved       float64
	rolled          bool
	newPeriod       int64
}

// tenantCounters reads the counters of tenants (sorted) with lock (FOR
// UPDATE on PostgreSQL): those with a row.
func (s *Store) tenantCounters(ctx context.Context, tx *sql.Tx, tenants []string, lock string) (map[string]*counters, error) {
	rows, err := s.writeQuery(ctx, tx, selTenantCountersSQL(len(tenants))+lock, anys(tenants))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cs := make(map[string]*counters, len(tenants))
	for rows.Next() {
		c := &counters{}
		var t string
		if err := rows.Scan(&t, &c.queued, &c.reserved, &c.spent, &c.period); err != nil {
			return nil, err
		}
		cs[t] = c
	}
	return cs, rows.Err()
}

// The counters' statements of a submission batch (hot: prepared on
// SQLite, the counters read for batches of one and two tenants).
var (
	selPlaneQueued      = hot(`SELECT queued FROM cp_plane WHERE id = 1`)
	updPlaneQueued      = hot(`UPDATE cp_plane SET queued = queued + ? WHERE id = 1`)
	updTenantQueued     = hot(`UPDATE cp_tenants SET queued = queued + ?, reserved = reserved + ? WHERE tenant = ?`)
	updTenantQueuedRoll = hot(`UPDATE cp_tenants SET spent = CASE WHEN period_ns < ? THEN 0 ELSE spent END, period_ns = CASE WHEN period_ns < ? THEN ? ELSE period_ns END,
				queued = queued + ?, reserved = reserved + ? WHERE tenant = ?`)
	_ = hot(selTenantCountersSQL(1))
	_ = hot(selTenantCountersSQL(2))
)

// selTenantCountersSQL reads the counters of n tenants.
func selTenantCountersSQL(n int) string {
	return `SELECT tenant, queued, reserved, spent, period_ns FROM cp_tenants WHERE tenant IN (` +
		strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + `) ORDER BY tenant`
}

// anys is ss as statement arguments.
func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, v := range ss {
		out[i] = v
	}
	return out
}

// writes are statements that return nothing, run in order.
type writes struct {
	qs   []string
	args []any
}

func (w *writes) add(q string, args ...any) {
	w.qs = append(w.qs, q)
	w.args = append(w.args, args...)
}

// exec runs the statements: on PostgreSQL as one, each but the last a
// data-modifying WITH query (one round trip; they touch distinct rows, as
// one statement's parts must), on SQLite one after another, prepared when
// hot (no round trips to save; each statement's arguments are as many as
// its placeholders, and no statement holds a literal '?').
func (w *writes) exec(ctx context.Context, tx *sql.Tx, s *Store) error {
	d := s.d
	if len(w.qs) == 0 {
		return nil
	}
	if d.name == "postgres" {
		var b strings.Builder
		for i, q := range w.qs[:len(w.qs)-1] {
			if i == 0 {
				b.WriteString("WITH ")
			} else {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "w%d AS (%s)", i, q)
		}
		b.WriteString(" ")
		b.WriteString(w.qs[len(w.qs)-1])
		_, err := tx.ExecContext(ctx, d.q(b.String()), w.args...)
		return err
	}
	args := w.args
	for _, q := range w.qs {
		n := strings.Count(q, "?")
		if _, err := s.exec(ctx, tx, q, args[:n]...); err != nil {
			return err
		}
		args = args[n:]
	}
	return nil
}
