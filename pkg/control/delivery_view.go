package control

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Acceptance of a job whose tenant has destinations that require the
// result: validated delivery, never plain success before the receipts.
const (
	// AcceptPublished: every required destination returned its receipt of
	// the result.
	AcceptPublished = "result published"
	// AcceptFailed: a required destination's budget for the result was
	// spent.
	AcceptFailed = "notification failed"
)

// AcceptPending is "result <state>, notification pending".
func AcceptPending(st State) string { return fmt.Sprintf("result %s, notification pending", st) }

// DeliveryStatus is how a job's deliveries stand.
type DeliveryStatus struct {
	// Acceptance is set once the job is terminal and some destination
	// requires its result: AcceptPublished, AcceptPending(state) or
	// AcceptFailed.
	Acceptance   string              `json:"acceptance,omitempty"`
	Destinations []DestinationStatus `json:"destinations"`
}

// DestinationStatus is one destination's deliveries of a job.
type DestinationStatus struct {
	Name           string `json:"name"`
	RequiresResult bool   `json:"requiresResult,omitempty"`
	Delivered      int    `json:"delivered"`
	Failed         int    `json:"failed,omitempty"`
	Collapsed      int    `json:"collapsed,omitempty"`
	// Retrying is the event being retried: its sequence, attempts so far,
	// the next try and the last error.
	Retrying *Retrying `json:"retrying,omitempty"`
	// Result is the receipt of the result event.
	Result *Receipt `json:"result,omitempty"`
}

// Retrying is an event a destination has not taken yet.
type Retrying struct {
	Seq       int64     `json:"seq"`
	Attempts  int       `json:"attempts"`
	NextTry   time.Time `json:"nextTry"`
	LastError string    `json:"lastError"`
}

// deliveryView fills j's ResultPublished and Delivery from the worker's
// records and the tenant's destinations now.
func (p *Plane) deliveryView(ctx context.Context, j *Job) error {
	recs, err := p.c.Store.deliveryRecords(ctx, j.ID)
	if err != nil {
		return err
	}
	j.ResultPublished = recs.published
	var names []string
	required := map[string]bool{}
	if cfg, err := p.c.Config.Current(ctx); err == nil {
		if t, ok := cfg.Tenants[j.Tenant]; ok {
			for _, d := range t.Value.Destinations {
				names = append(names, d.Name)
				required[d.Name] = d.RequiresResult
			}
		}
	}
	for d := range recs.counts {
		if !slices.Contains(names, d) {
			names = append(names, d) // a destination removed since
		}
	}
	if len(names) == 0 {
		return nil
	}
	ds := &DeliveryStatus{}
	pending, failed := false, false
	for _, n := range names {
		st := DestinationStatus{Name: n, RequiresResult: required[n], Delivered: recs.counts[n][ReceiptDelivered],
			Failed: recs.counts[n][ReceiptFailed], Collapsed: recs.counts[n][ReceiptCollapsed], Result: recs.results[n]}
		if pr := recs.progress[n]; pr != nil {
			st.Retrying = &Retrying{Seq: pr.Seq, Attempts: pr.Attempts, NextTry: pr.Next, LastError: pr.LastErr}
		}
		if st.RequiresResult {
			switch {
			case st.Result == nil:
				pending = true
			case st.Result.Outcome == ReceiptFailed:
				failed = true
			}
		}
		ds.Destinations = append(ds.Destinations, st)
	}
	switch {
	case !j.State.Terminal() || !slices.ContainsFunc(names, func(n string) bool { return required[n] }):
	case j.ResultPublished != nil:
		ds.Acceptance = AcceptPublished
	case failed:
		ds.Acceptance = AcceptFailed
	case pending:
		ds.Acceptance = AcceptPending(j.State)
	default: // every required receipt is in; the stamp follows in its transaction
		ds.Acceptance = AcceptPending(j.State)
	}
	j.Delivery = ds
	return nil
}

// artifact serves an artifact of a job, under the job's tenancy.
func (s *Server) artifact(w http.ResponseWriter, r *http.Request) {
	b, err := s.p.c.Store.Artifact(r.Context(), tenantOf(r), r.PathValue("id"), r.PathValue("name"))
	if err != nil {
		writeFailure(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", "attachment")
	_, _ = w.Write(b)
}
