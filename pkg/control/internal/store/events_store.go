package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// eventSchema is the events' tables: the events, a head row per job (its
// counter, what retention trimmed, whether the stream ended) and the
// consumers' cursors.
func eventSchema(d dialect) []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS cp_event_heads (
			job_id TEXT PRIMARY KEY,
			last_seq BIGINT NOT NULL DEFAULT 0,
			output_bytes BIGINT NOT NULL DEFAULT 0,
			trimmed_through BIGINT NOT NULL DEFAULT 0,
			ended INTEGER NOT NULL DEFAULT 0)`,
		// A segment holds the events first_seq..last_seq of one append, all
		// output (stdout, stderr, status: output = 1, what retention trims)
		// or none, one per line: the kind, a space, the data (compact JSON,
		// never a line break). Size counts the data's bytes.
		`CREATE TABLE IF NOT EXISTS cp_event_segments (
			job_id TEXT NOT NULL, last_seq BIGINT NOT NULL, first_seq BIGINT NOT NULL,
			at_ns BIGINT NOT NULL, output INTEGER NOT NULL, events TEXT NOT NULL, size BIGINT NOT NULL,
			PRIMARY KEY (job_id, last_seq))`,
		`CREATE INDEX IF NOT EXISTS cp_event_segments_age ON cp_event_segments (at_ns)`,
		`CREATE TABLE IF NOT EXISTS cp_event_cursors (
			consumer TEXT NOT NULL, job_id TEXT NOT NULL,
			acked_seq BIGINT NOT NULL DEFAULT 0,
			delivered_seq BIGINT NOT NULL DEFAULT 0,
			owner TEXT NOT NULL DEFAULT '',
			lease_until_ns BIGINT NOT NULL DEFAULT 0,
			redelivered BIGINT NOT NULL DEFAULT 0,
			PRIMARY KEY (consumer, job_id))`,
	}
}

// pgNotifyChannel carries the id of a job whose stream grew (PostgreSQL).
const pgNotifyChannel = "slipway_control_events"

// AppendEvents appends events to a job's stream in one transaction and
// returns the sequence of the last. Sequences are taken from the job's
// counter row in the same transaction: no gaps, never twice. A result
// event ends the stream; appends after it get ErrStreamEnded.
func (s *Store) AppendEvents(ctx context.Context, jobID string, evs []NewEvent) (int64, error) {
	checked := make([]NewEvent, len(evs))
	for i, e := range evs {
		if e.Kind == controlapi.KindResult || e.Kind == controlapi.KindState {
			return 0, fmt.Errorf("%w: %s events are appended by the job's transitions only", ErrEventKind, e.Kind)
		}
		var err error
		if checked[i], err = checkEvent(e); err != nil {
			return 0, err
		}
	}
	return s.appendGrouped(ctx, jobID, checked)
}

// The statements of appends and reads (prepared once on SQLite).
const (
	selEventHead = `SELECT last_seq, trimmed_through, ended FROM cp_event_heads WHERE job_id = ?`
	selSegments  = `SELECT first_seq, last_seq, at_ns, events FROM cp_event_segments WHERE job_id = +? AND last_seq > +? ORDER BY last_seq LIMIT +?`
)

// appendTransition appends the state event of a transition, and the result
// event after it when the state is terminal, in the transition's
// transaction. The job's row is already written in tx.
var selJobDoc = hot(`SELECT doc FROM cp_jobs WHERE id = ?`)

func (s *Store) appendTransition(ctx context.Context, tx *sql.Tx, id string, st controlapi.State, reason string, at time.Time) error {
	evs := []NewEvent{{Kind: controlapi.KindState, Data: MustJSON(controlapi.StateData{State: st, Reason: reason})}}
	if st.Terminal() {
		var doc string
		if err := s.queryRow(ctx, tx, selJobDoc, id).Scan(&doc); err != nil {
			return err
		}
		j, err := scanJob(doc)
		if err != nil {
			return err
		}
		evs = append(evs, NewEvent{Kind: controlapi.KindResult, Data: MustJSON(controlapi.ResultData{State: j.State, Reason: j.Reason, Detail: j.Detail,
			ExitCode: j.ExitCode, StopOutcome: j.StopOutcome, RunID: j.RunID, Results: j.Results, Output: j.Output,
			OutputDroppedBytes: j.OutputDroppedBytes, OutputDroppedLines: j.OutputDroppedLines, EndedAt: j.EndedAt})})
	}
	_, err := s.appendTx(ctx, tx, id, evs, at)
	return err
}

// trimSize deletes a job's oldest output segments until at most keep
// bytes of output are left.
func (s *Store) trimSize(ctx context.Context, tx *sql.Tx, jobID string, total, keep int64) error {
	var from int64
	if err := tx.QueryRowContext(ctx, s.d.q(`SELECT trimmed_through FROM cp_event_heads WHERE job_id = ?`), jobID).Scan(&from); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, s.d.q(`SELECT last_seq, size FROM cp_event_segments WHERE job_id = ? AND last_seq > ? AND output = 1 ORDER BY last_seq`), jobID, from)
	if err != nil {
		return err
	}
	through := from
	for rows.Next() && total > keep {
		var seq, size int64
		if err := rows.Scan(&seq, &size); err != nil {
			rows.Close()
			return err
		}
		through, total = seq, total-size
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	return s.trimThrough(ctx, tx, jobID, through)
}

// trimThrough deletes a job's output segments that end by through and
// records it.
func (s *Store) trimThrough(ctx context.Context, tx *sql.Tx, jobID string, through int64) error {
	var freed int64
	if err := tx.QueryRowContext(ctx, s.d.q(`SELECT COALESCE(SUM(size), 0) FROM cp_event_segments WHERE job_id = ? AND last_seq <= ? AND output = 1`), jobID, through).Scan(&freed); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.d.q(`DELETE FROM cp_event_segments WHERE job_id = ? AND last_seq <= ? AND output = 1`), jobID, through); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, s.d.q(`UPDATE cp_event_heads SET output_bytes = output_bytes - ?,
		trimmed_through = CASE WHEN trimmed_through < ? THEN ? ELSE trimmed_through END WHERE job_id = ?`), freed, through, through, jobID)
	return err
}

// TrimEvents applies the time retention: output events older than
// now - MaxAge are deleted (at most limit jobs per call). It returns the
// jobs it trimmed.
func (s *Store) TrimEvents(ctx context.Context, now time.Time, limit int) (int, error) {
	cut := now.Add(-s.ev.retention().MaxAge).UnixNano()
	rows, err := s.r.QueryContext(ctx, s.d.q(fmt.Sprintf(`SELECT job_id, MAX(last_seq) FROM cp_event_segments WHERE at_ns < ? AND output = 1
		GROUP BY job_id LIMIT %d`, limit)), cut)
	if err != nil {
		return 0, Unavailable(err)
	}
	type cut1 struct {
		job string
		seq int64
	}
	var cuts []cut1
	for rows.Next() {
		var c cut1
		if err := rows.Scan(&c.job, &c.seq); err != nil {
			rows.Close()
			return 0, err
		}
		cuts = append(cuts, c)
	}
	rows.Close()
	for _, c := range cuts {
		if err := s.tx(ctx, func(tx *sql.Tx) error { return s.trimThrough(ctx, tx, c.job, c.seq) }); err != nil {
			return 0, err
		}
	}
	return len(cuts), Unavailable(rows.Err())
}

// ReadEvents returns the job's head and up to limit events after after,
// from one snapshot.
func (s *Store) ReadEvents(ctx context.Context, jobID string, after int64, limit int) (controlapi.StreamHead, []controlapi.Event, error) {
	if s.readStmts != nil {
		// the head alone, and the events from the tail if it has them all
		var h controlapi.StreamHead
		var ended int
		err := s.readStmts[selEventHead].QueryRowContext(ctx, jobID).Scan(&h.Last, &h.TrimmedThrough, &ended)
		if errors.Is(err, sql.ErrNoRows) {
			return h, nil, nil
		}
		if err != nil {
			return h, nil, Unavailable(err)
		}
		h.Ended = ended == 1
		if after >= h.Last {
			return h, nil, nil
		}
		if after >= h.TrimmedThrough {
			if evs, ok := s.ev.fromTail(jobID, after, h.Last, limit); ok {
				return h, evs, nil
			}
		}
	}
	return s.ReadEventsTx(ctx, jobID, after, limit)
}

// ReadEventsTx reads the head and the events in one read transaction.
func (s *Store) ReadEventsTx(ctx context.Context, jobID string, after int64, limit int) (controlapi.StreamHead, []controlapi.Event, error) {
	var h controlapi.StreamHead
	opts := &sql.TxOptions{ReadOnly: true}
	if s.d.name == "postgres" {
		opts.Isolation = sql.LevelRepeatableRead
	}
	tx, err := s.r.BeginTx(ctx, opts)
	if err != nil {
		return h, nil, Unavailable(err)
	}
	defer tx.Rollback()
	var ended int
	var row *sql.Row
	if s.readStmts != nil {
		row = tx.StmtContext(ctx, s.readStmts[selEventHead]).QueryRowContext(ctx, jobID)
	} else {
		row = tx.QueryRowContext(ctx, s.d.q(selEventHead), jobID)
	}
	err = row.Scan(&h.Last, &h.TrimmedThrough, &ended)
	if errors.Is(err, sql.ErrNoRows) {
		return h, nil, nil
	}
	if err != nil {
		return h, nil, Unavailable(err)
	}
	h.Ended = ended == 1
	if after >= h.Last {
		return h, nil, nil
	}
	var rows *sql.Rows
	if s.readStmts != nil {
		rows, err = tx.StmtContext(ctx, s.readStmts[selSegments]).QueryContext(ctx, jobID, after, limit)
	} else {
		rows, err = tx.QueryContext(ctx, s.d.q(selSegments), jobID, after, limit)
	}
	if err != nil {
		return h, nil, Unavailable(err)
	}
	defer rows.Close()
	var out []controlapi.Event
	for len(out) < limit && rows.Next() {
		var first, last, at int64
		var events string
		if err := rows.Scan(&first, &last, &at, &events); err != nil {
			return h, nil, err
		}
		if out, err = parseSegment(jobID, first, last, at, events, after, limit-len(out), out); err != nil {
			return h, nil, err
		}
	}
	return h, out, Unavailable(rows.Err())
}

// Events returns up to limit events of a job of tenant ("" : any) after
// sequence after, and the stream's head.
func (s *Store) Events(ctx context.Context, tenant, jobID string, after int64, limit int) (controlapi.StreamHead, []controlapi.Event, error) {
	if _, err := s.Get(ctx, tenant, jobID); err != nil {
		return controlapi.StreamHead{}, nil, err
	}
	if limit <= 0 || limit > 10000 {
		limit = 1000
	}
	return s.ReadEvents(ctx, jobID, after, limit)
}

// Delivery is what a consumer gets from Consume.
type Delivery struct {
	Events []controlapi.Event
	// Acked is the consumer's acknowledged sequence for the job.
	Acked int64
	// Redelivered counts the events handed out before (to an owner that
	// died or did not acknowledge them) and handed out again now.
	Redelivered int
	// Trimmed is set when events the consumer had not acknowledged were
	// deleted by retention.
	Trimmed *controlapi.TrimmedData
	// Done: the stream ended and the consumer acknowledged all of it.
	Done bool
}

// Consume hands consumer's owner the events of a job after what the
// consumer acknowledged (at most max), under a lease: another owner of the
// same consumer gets ErrConflict until the lease runs out, then the events
// handed out and not acknowledged are delivered to it again
// (at-least-once). Ack records progress.
func (s *Store) Consume(ctx context.Context, consumer, owner, jobID string, lease time.Duration, max int) (*Delivery, error) {
	if consumer == "" || owner == "" {
		return nil, fmt.Errorf("%w: a consumer and an owner are required", ErrBadRequest)
	}
	now := time.Now()
	var acked int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.exec(ctx, tx, `INSERT INTO cp_event_cursors (consumer, job_id) VALUES (?, ?) ON CONFLICT (consumer, job_id) DO NOTHING`, consumer, jobID); err != nil {
			return err
		}
		lock := ""
		if s.d.name == "postgres" {
			lock = " FOR UPDATE"
		}
		var cur string
		var until int64
		if err := tx.QueryRowContext(ctx, s.d.q(`SELECT acked_seq, owner, lease_until_ns FROM cp_event_cursors WHERE consumer = ? AND job_id = ?`+lock),
			consumer, jobID).Scan(&acked, &cur, &until); err != nil {
			return err
		}
		if cur != "" && cur != owner && until > now.UnixNano() {
			return fmt.Errorf("%w: consumer %s of job %s is held by %s until %s", ErrConflict, consumer, jobID, cur, time.Unix(0, until).UTC().Format(time.RFC3339Nano))
		}
		_, err := s.exec(ctx, tx, `UPDATE cp_event_cursors SET owner = ?, lease_until_ns = ? WHERE consumer = ? AND job_id = ?`,
			owner, now.Add(lease).UnixNano(), consumer, jobID)
		return err
	})
	if err != nil {
		return nil, err
	}
	h, evs, err := s.ReadEvents(ctx, jobID, acked, max)
	if err != nil {
		return nil, err
	}
	d := &Delivery{Events: evs, Acked: acked, Done: h.Ended && acked >= h.Last}
	if h.TrimmedThrough > acked {
		d.Trimmed = TrimmedError(jobID, acked, h.TrimmedThrough)
	}
	if len(evs) == 0 {
		return d, nil
	}
	var prev int64
	err = s.tx(ctx, func(tx *sql.Tx) error {
		d.Redelivered = 0
		if err := tx.QueryRowContext(ctx, s.d.q(`SELECT delivered_seq FROM cp_event_cursors WHERE consumer = ? AND job_id = ?`), consumer, jobID).Scan(&prev); err != nil {
			return err
		}
		top := evs[len(evs)-1].Seq
		for _, e := range evs {
			if e.Seq <= prev {
				d.Redelivered++
			}
		}
		_, err := s.exec(ctx, tx, `UPDATE cp_event_cursors SET delivered_seq = CASE WHEN delivered_seq < ? THEN ? ELSE delivered_seq END,
			redelivered = redelivered + ? WHERE consumer = ? AND job_id = ? AND owner = ?`, top, top, d.Redelivered, consumer, jobID, owner)
		return err
	})
	return d, err
}

// Ack records that consumer's owner handled the job's events through seq.
// An owner that lost its lease gets ErrConflict; a sequence beyond the
// stream's last is ErrBadRequest. Acknowledging is repeat-safe and never
// moves backwards.
func (s *Store) Ack(ctx context.Context, consumer, owner, jobID string, seq int64) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		var last int64
		err := tx.QueryRowContext(ctx, s.d.q(`SELECT last_seq FROM cp_event_heads WHERE job_id = ?`), jobID).Scan(&last)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if seq > last {
			return fmt.Errorf("%w: ack %d of job %s: its stream's last sequence is %d", ErrBadRequest, seq, jobID, last)
		}
		n, err := s.exec(ctx, tx, `UPDATE cp_event_cursors SET acked_seq = CASE WHEN acked_seq < ? THEN ? ELSE acked_seq END
			WHERE consumer = ? AND job_id = ? AND owner = ?`, seq, seq, consumer, jobID, owner)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: consumer %s of job %s is not held by %s", ErrConflict, consumer, jobID, owner)
		}
		return nil
	})
}

// PendingJobs lists jobs whose streams hold events consumer has not
// acknowledged (at most limit): the work of a delivery worker.
func (s *Store) PendingJobs(ctx context.Context, consumer string, limit int) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, s.d.q(fmt.Sprintf(`SELECT h.job_id FROM cp_event_heads h
		LEFT JOIN cp_event_cursors c ON c.job_id = h.job_id AND c.consumer = ?
		WHERE h.last_seq > COALESCE(c.acked_seq, 0) ORDER BY h.job_id LIMIT %d`, limit)), consumer)
	if err != nil {
		return nil, Unavailable(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func TrimmedError(jobID string, after, through int64) *controlapi.TrimmedData {
	return &controlapi.TrimmedData{Error: "trimmed", Job: jobID, After: after, TrimmedThrough: through,
		Detail: fmt.Sprintf("output events (stdout, stderr, status) of job %s from sequence %d through %d were deleted by retention; "+
			"state and result events are kept and follow; the job's bounded output is in its result event and GET /v1/jobs/%s", jobID, after+1, through, jobID)}
}
