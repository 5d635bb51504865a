package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// deliverySchema is the output worker's tables: a receipt per (job,
// destination, event) that reached its end (delivered, failed, collapsed),
// the progress of the event a destination is retrying, the jobs whose
// result was published (validated delivery) and the artifacts messages
// link to.
func deliverySchema(dialect) []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS cp_delivery_receipts (
			job_id TEXT NOT NULL, destination TEXT NOT NULL, seq BIGINT NOT NULL,
			kind TEXT NOT NULL, outcome TEXT NOT NULL, http_status INTEGER NOT NULL DEFAULT 0,
			remote_id TEXT NOT NULL DEFAULT '', attempts INTEGER NOT NULL DEFAULT 0,
			idem_key TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '', at_ns BIGINT NOT NULL,
			PRIMARY KEY (job_id, destination, seq))`,
		`CREATE TABLE IF NOT EXISTS cp_delivery_progress (
			job_id TEXT NOT NULL, destination TEXT NOT NULL, seq BIGINT NOT NULL,
			attempts INTEGER NOT NULL, next_ns BIGINT NOT NULL, last_error TEXT NOT NULL,
			PRIMARY KEY (job_id, destination))`,
		`CREATE TABLE IF NOT EXISTS cp_delivery_published (job_id TEXT PRIMARY KEY, at_ns BIGINT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS cp_artifacts (
			job_id TEXT NOT NULL, name TEXT NOT NULL, data TEXT NOT NULL, size BIGINT NOT NULL,
			created_ns BIGINT NOT NULL, PRIMARY KEY (job_id, name))`,
	}
}

// PendingJobsOf is PendingJobs for one tenant's jobs: a destination's
// consumer only ever sees its own tenant's streams.
func (s *Store) PendingJobsOf(ctx context.Context, consumer, tenant string, limit int) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, s.d.q(fmt.Sprintf(`SELECT h.job_id FROM cp_event_heads h
		JOIN cp_jobs j ON j.id = h.job_id AND j.tenant = ?
		LEFT JOIN cp_event_cursors c ON c.job_id = h.job_id AND c.consumer = ?
		WHERE h.last_seq > COALESCE(c.acked_seq, 0) ORDER BY h.job_id LIMIT %d`, limit)), tenant, consumer)
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
	return out, Unavailable(rows.Err())
}

// Receipt returns the stored receipt of (job, destination, seq), nil if none.
func (s *Store) Receipt(ctx context.Context, job, dest string, seq int64) (*controlapi.Receipt, error) {
	r := &controlapi.Receipt{Destination: dest, Seq: seq}
	var kind string
	var at int64
	err := s.r.QueryRowContext(ctx, s.d.q(`SELECT kind, outcome, http_status, remote_id, attempts, idem_key, detail, at_ns
		FROM cp_delivery_receipts WHERE job_id = ? AND destination = ? AND seq = ?`), job, dest, seq).
		Scan(&kind, &r.Outcome, &r.HTTPStatus, &r.RemoteID, &r.Attempts, &r.Key, &r.Detail, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, Unavailable(err)
	}
	r.Kind, r.At = controlapi.EventKind(kind), time.Unix(0, at).UTC()
	return r, nil
}

// PutReceipt stores a receipt (the first one stays: repeat-safe) and ends
// the destination's progress on that event. required, when the receipt is
// a delivered result, are the destinations whose result receipts publish
// the job's result: once all are in, result_published is stamped in the
// same transaction.
func (s *Store) PutReceipt(ctx context.Context, job string, r controlapi.Receipt, required []string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.exec(ctx, tx, `INSERT INTO cp_delivery_receipts (job_id, destination, seq, kind, outcome, http_status, remote_id, attempts, idem_key, detail, at_ns)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_id, destination, seq) DO NOTHING`,
			job, r.Destination, r.Seq, string(r.Kind), r.Outcome, r.HTTPStatus, r.RemoteID, r.Attempts, r.Key, r.Detail, r.At.UnixNano()); err != nil {
			return err
		}
		if _, err := s.exec(ctx, tx, `DELETE FROM cp_delivery_progress WHERE job_id = ? AND destination = ? AND seq <= ?`, job, r.Destination, r.Seq); err != nil {
			return err
		}
		if r.Kind != controlapi.KindResult || r.Outcome != controlapi.ReceiptDelivered || len(required) == 0 {
			return nil
		}
		return s.stampPublishedTx(ctx, tx, job, required, r.At)
	})
}

// stampPublishedTx records result_published when every required
// destination's receipt of the result is delivered.
func (s *Store) stampPublishedTx(ctx context.Context, tx *sql.Tx, job string, required []string, at time.Time) error {
	args := []any{job}
	for _, d := range required {
		args = append(args, d)
	}
	var n int
	if err := tx.QueryRowContext(ctx, s.d.q(`SELECT COUNT(DISTINCT destination) FROM cp_delivery_receipts
		WHERE job_id = ? AND kind = 'result' AND outcome = 'delivered' AND destination IN (?`+strings.Repeat(", ?", len(required)-1)+`)`), args...).Scan(&n); err != nil {
		return err
	}
	if n < len(required) {
		return nil
	}
	_, err := s.exec(ctx, tx, `INSERT INTO cp_delivery_published (job_id, at_ns) VALUES (?, ?) ON CONFLICT (job_id) DO NOTHING`, job, at.UnixNano())
	return err
}

// Progress is a destination's retries of one event.
type Progress struct {
	Seq      int64
	Attempts int
	Next     time.Time
	LastErr  string
}

func (s *Store) PutProgress(ctx context.Context, job, dest string, p Progress) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := s.exec(ctx, tx, `INSERT INTO cp_delivery_progress (job_id, destination, seq, attempts, next_ns, last_error) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (job_id, destination) DO UPDATE SET seq = excluded.seq, attempts = excluded.attempts, next_ns = excluded.next_ns, last_error = excluded.last_error`,
			job, dest, p.Seq, p.Attempts, p.Next.UnixNano(), p.LastErr)
		return err
	})
}

func (s *Store) GetProgress(ctx context.Context, job, dest string) (*Progress, error) {
	p := &Progress{}
	var next int64
	err := s.r.QueryRowContext(ctx, s.d.q(`SELECT seq, attempts, next_ns, last_error FROM cp_delivery_progress WHERE job_id = ? AND destination = ?`), job, dest).
		Scan(&p.Seq, &p.Attempts, &next, &p.LastErr)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, Unavailable(err)
	}
	p.Next = time.Unix(0, next).UTC()
	return p, nil
}

// PutArtifact stores an artifact of a job once (the same name keeps its
// first content).
func (s *Store) PutArtifact(ctx context.Context, job, name string, data []byte) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := s.exec(ctx, tx, `INSERT INTO cp_artifacts (job_id, name, data, size, created_ns) VALUES (?, ?, ?, ?, ?) ON CONFLICT (job_id, name) DO NOTHING`,
			job, name, string(data), len(data), time.Now().UnixNano())
		return err
	})
}

// Artifact returns an artifact of a job of tenant ("" : any); another
// tenant's job, or a name it does not have, is ErrNotFound.
func (s *Store) Artifact(ctx context.Context, tenant, job, name string) ([]byte, error) {
	if _, err := s.Get(ctx, tenant, job); err != nil {
		return nil, err
	}
	var data string
	err := s.r.QueryRowContext(ctx, s.d.q(`SELECT data FROM cp_artifacts WHERE job_id = ? AND name = ?`), job, name).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("job %s: artifact %q: %w", job, name, ErrNotFound)
	}
	return []byte(data), Unavailable(err)
}

// DeliveryRecords is what the store says about a job's deliveries.
type DeliveryRecords struct {
	Published *time.Time
	Counts    map[string]map[string]int      // destination -> outcome -> events
	Results   map[string]*controlapi.Receipt // destination -> its receipt of the result
	Progress  map[string]*Progress
}

func (s *Store) DeliveryRecords(ctx context.Context, job string) (*DeliveryRecords, error) {
	out := &DeliveryRecords{Counts: map[string]map[string]int{}, Results: map[string]*controlapi.Receipt{}, Progress: map[string]*Progress{}}
	var at int64
	switch err := s.r.QueryRowContext(ctx, s.d.q(`SELECT at_ns FROM cp_delivery_published WHERE job_id = ?`), job).Scan(&at); {
	case err == nil:
		out.Published = tp(time.Unix(0, at))
	case !errors.Is(err, sql.ErrNoRows):
		return nil, Unavailable(err)
	}
	rows, err := s.r.QueryContext(ctx, s.d.q(`SELECT destination, outcome, COUNT(*) FROM cp_delivery_receipts WHERE job_id = ? GROUP BY destination, outcome`), job)
	if err != nil {
		return nil, Unavailable(err)
	}
	for rows.Next() {
		var d, o string
		var n int
		if err := rows.Scan(&d, &o, &n); err != nil {
			rows.Close()
			return nil, err
		}
		if out.Counts[d] == nil {
			out.Counts[d] = map[string]int{}
		}
		out.Counts[d][o] = n
	}
	rows.Close()
	rows, err = s.r.QueryContext(ctx, s.d.q(`SELECT destination, seq, outcome, http_status, remote_id, attempts, idem_key, detail, at_ns
		FROM cp_delivery_receipts WHERE job_id = ? AND kind = 'result'`), job)
	if err != nil {
		return nil, Unavailable(err)
	}
	for rows.Next() {
		r := &controlapi.Receipt{Kind: controlapi.KindResult}
		if err := rows.Scan(&r.Destination, &r.Seq, &r.Outcome, &r.HTTPStatus, &r.RemoteID, &r.Attempts, &r.Key, &r.Detail, &at); err != nil {
			rows.Close()
			return nil, err
		}
		r.At = time.Unix(0, at).UTC()
		out.Results[r.Destination] = r
	}
	rows.Close()
	rows, err = s.r.QueryContext(ctx, s.d.q(`SELECT destination, seq, attempts, next_ns, last_error FROM cp_delivery_progress WHERE job_id = ?`), job)
	if err != nil {
		return nil, Unavailable(err)
	}
	defer rows.Close()
	for rows.Next() {
		var d string
		p := &Progress{}
		var next int64
		if err := rows.Scan(&d, &p.Seq, &p.Attempts, &next, &p.LastErr); err != nil {
			return nil, err
		}
		p.Next = time.Unix(0, next).UTC()
		out.Progress[d] = p
	}
	return out, Unavailable(rows.Err())
}
