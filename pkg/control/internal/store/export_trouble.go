package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// ExportTrouble is a delivery of a job's event that failed (its retry
// budget spent, or refused) or is being retried: the durable record of an
// export incident, with its source identity (job, run, and the digest of
// the result it carries) and the attempts.
type ExportTrouble struct {
	Job         string               `json:"job"`
	Tenant      string               `json:"tenant"`
	RunID       string               `json:"runId,omitempty"`
	JobState    controlapi.State     `json:"jobState"`
	Destination string               `json:"destination"`
	Seq         int64                `json:"seq"`
	Kind        controlapi.EventKind `json:"kind,omitempty"`
	// Outcome is ReceiptFailed, or OutcomeRetrying while the budget lasts.
	Outcome    string `json:"outcome"`
	Attempts   int    `json:"attempts"`
	HTTPStatus int    `json:"httpStatus,omitempty"`
	// Detail is the receipt's detail (with the budget), or the last error.
	Detail string `json:"detail"`
	// At is when the receipt was written; NextTry the next attempt of a
	// delivery being retried.
	At      time.Time  `json:"at,omitzero"`
	NextTry *time.Time `json:"nextTry,omitempty"`
	// EventDigest is "sha256:" and the hex SHA-256 of the event's data as
	// stored (the result the delivery carries, for a result event); ""
	// when retention trimmed the event.
	EventDigest string `json:"eventDigest,omitempty"`
}

// OutcomeRetrying is the Outcome of an ExportTrouble whose budget is not spent.
const OutcomeRetrying = "retrying"

// ExportTroubles returns the newest failed deliveries and the deliveries
// being retried, at most limit of each (100 when limit <= 0), newest
// first. It reads the store only.
func (s *Store) ExportTroubles(ctx context.Context, limit int) ([]ExportTrouble, error) {
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	var out []ExportTrouble
	rows, err := s.r.QueryContext(ctx, s.d.q(`SELECT job_id, destination, seq, kind, attempts, http_status, detail, at_ns
		FROM cp_delivery_receipts WHERE outcome = ? ORDER BY at_ns DESC LIMIT ?`), controlapi.ReceiptFailed, limit)
	if err != nil {
		return nil, Unavailable(err)
	}
	for rows.Next() {
		var t ExportTrouble
		var kind string
		var at int64
		if err := rows.Scan(&t.Job, &t.Destination, &t.Seq, &kind, &t.Attempts, &t.HTTPStatus, &t.Detail, &at); err != nil {
			rows.Close()
			return nil, err
		}
		t.Kind, t.Outcome, t.At = controlapi.EventKind(kind), controlapi.ReceiptFailed, time.Unix(0, at).UTC()
		out = append(out, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, Unavailable(err)
	}
	rows, err = s.r.QueryContext(ctx, s.d.q(`SELECT job_id, destination, seq, attempts, next_ns, last_error
		FROM cp_delivery_progress p WHERE attempts > 0 AND NOT EXISTS (SELECT 1 FROM cp_delivery_receipts r
			WHERE r.job_id = p.job_id AND r.destination = p.destination AND r.seq = p.seq)
		ORDER BY next_ns DESC LIMIT ?`), limit)
	if err != nil {
		return nil, Unavailable(err)
	}
	for rows.Next() {
		t := ExportTrouble{Outcome: OutcomeRetrying}
		var next int64
		if err := rows.Scan(&t.Job, &t.Destination, &t.Seq, &t.Attempts, &next, &t.Detail); err != nil {
			rows.Close()
			return nil, err
		}
		t.NextTry = tp(time.Unix(0, next))
		out = append(out, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, Unavailable(err)
	}
	for i := range out {
		t := &out[i]
		if j, err := s.Get(ctx, "", t.Job); err == nil {
			t.Tenant, t.RunID, t.JobState = j.Tenant, j.RunID, j.State
		}
		if _, evs, err := s.ReadEvents(ctx, t.Job, t.Seq-1, 1); err == nil && len(evs) == 1 && evs[0].Seq == t.Seq {
			if t.Kind == "" {
				t.Kind = evs[0].Kind
			}
			sum := sha256.Sum256(evs[0].Data)
			t.EventDigest = "sha256:" + hex.EncodeToString(sum[:])
		}
	}
	return out, nil
}
