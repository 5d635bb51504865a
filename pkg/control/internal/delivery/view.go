package delivery

import (
	"context"
	"slices"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/config/tenancy"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
)

// View fills j's ResultPublished and Delivery from the worker's records in
// s and the tenant's destinations in the configuration current gives.
func View(ctx context.Context, s *store.Store, current func(context.Context) (*tenancy.Config, error), j *controlapi.Job) error {
	recs, err := s.DeliveryRecords(ctx, j.ID)
	if err != nil {
		return err
	}
	j.ResultPublished = recs.Published
	var names []string
	required := map[string]bool{}
	if cfg, err := current(ctx); err == nil {
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
