package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// printDelivery prints how a job's deliveries stand: its acceptance
// (validated delivery: "result succeeded, notification pending", never
// plain success before the receipts) and each destination.
func printDelivery(w io.Writer, j *controlapi.Job) {
	d := j.Delivery
	if d == nil {
		if j.State.Terminal() {
			fmt.Fprintf(w, "delivery: tenant %s has no destination: the result is in this record and ends its event stream, read by the user's client (no receipt to wait for)\n", j.Tenant)
		}
		return
	}
	if d.Acceptance != "" {
		fmt.Fprintf(w, "accepted: %s", d.Acceptance)
		if j.ResultPublished != nil {
			fmt.Fprintf(w, " at %s", j.ResultPublished.Format(time.RFC3339))
		}
		fmt.Fprintln(w)
	}
	for _, ds := range d.Destinations {
		req := ""
		if ds.RequiresResult {
			req = ", requires the result"
		}
		fmt.Fprintf(w, "delivery: %s%s: %d delivered, %d failed, %d collapsed", ds.Name, req, ds.Delivered, ds.Failed, ds.Collapsed)
		if r := ds.Result; r != nil {
			fmt.Fprintf(w, "; result %s (HTTP %d, id %q, %d attempts, key %s)", r.Outcome, r.HTTPStatus, r.RemoteID, r.Attempts, r.Key)
		}
		if rt := ds.Retrying; rt != nil {
			fmt.Fprintf(w, "; pending event %d: %d attempts, next try %s, last error: %s", rt.Seq, rt.Attempts, rt.NextTry.Format(time.RFC3339), rt.LastError)
		}
		fmt.Fprintln(w)
	}
}
