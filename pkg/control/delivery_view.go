package control

import (
	"context"
	"net/http"
	"slices"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// deliveryView fills j's ResultPublished and Delivery from the worker's
// records and the tenant's destinations now.
func (p *Plane) deliveryView(ctx context.Context, j *controlapi.Job) error {
	recs, err := p.c.Store.DeliveryRecords(ctx, j.ID)
	if err != nil {
		return err
	}
	j.ResultPublished = recs.Published
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
	for d := range recs.Counts {
		if !slices.Contains(names, d) {
			names = append(names, d) // a destination removed since
		}
	}
	if len(names) == 0 {
		return nil
	}
	ds := &controlapi.DeliveryStatus{}
	pending, failed := false, false
	for _, n := range names {
		st := controlapi.DestinationStatus{Name: n, RequiresResult: required[n], Delivered: recs.Counts[n][controlapi.ReceiptDelivered],
			Failed: recs.Counts[n][controlapi.ReceiptFailed], Collapsed: recs.Counts[n][controlapi.ReceiptCollapsed], Result: recs.Results[n]}
		if pr := recs.Progress[n]; pr != nil {
			st.Retrying = &controlapi.Retrying{Seq: pr.Seq, Attempts: pr.Attempts, NextTry: pr.Next, LastError: pr.LastErr}
		}
		if st.RequiresResult {
			switch {
			case st.Result == nil:
				pending = true
			case st.Result.Outcome == controlapi.ReceiptFailed:
				failed = true
			}
		}
		ds.Destinations = append(ds.Destinations, st)
	}
	switch {
	case !j.State.Terminal() || !slices.ContainsFunc(names, func(n string) bool { return required[n] }):
	case j.ResultPublished != nil:
		ds.Acceptance = controlapi.AcceptPublished
	case failed:
		ds.Acceptance = controlapi.AcceptFailed
	case pending:
		ds.Acceptance = controlapi.AcceptPending(j.State)
	default: // every required receipt is in; the stamp follows in its transaction
		ds.Acceptance = controlapi.AcceptPending(j.State)
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
