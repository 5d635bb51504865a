package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/slipway-dev/slipway/internal/apierror"
	"github.com/slipway-dev/slipway/pkg/execution/cost"
)

// CostReport is a pool's cost in the window [since, until), read from the
// runtime's cost ledger: a value that encodes as runtimeapi.PoolCost
// (cost.PoolReport does). cost.ErrNotFound: no ledger yet.
type CostReport func(ctx context.Context, pool string, since, until time.Time) (any, error)

// WithCost serves GET /v1/pools/{pool}/cost?since=&until= from report.
func WithCost(report CostReport) ServerOption {
	return func(o *serverOptions) { o.cost = report }
}

// DefaultCostWindow is the window a cost request without since covers.
const DefaultCostWindow = 24 * time.Hour

// poolCost answers a pool's cost: since and until are RFC 3339 times
// (default: the last DefaultCostWindow until now).
func (s *Server) poolCost(report CostReport) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		since, until := now.Add(-DefaultCostWindow), now
		for _, p := range []struct {
			name string
			to   *time.Time
		}{{"since", &since}, {"until", &until}} {
			v := r.URL.Query().Get(p.name)
			if v == "" {
				continue
			}
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				s.writeError(w, r, http.StatusBadRequest, apierror.Public(fmt.Sprintf("query parameter %s=%q is not an RFC 3339 time", p.name, v), nil))
				return
			}
			*p.to = t
		}
		if !until.After(since) {
			s.writeError(w, r, http.StatusBadRequest, apierror.Public("the window is empty: until must be after since", nil))
			return
		}
		rep, err := report(r.Context(), r.PathValue("pool"), since, until)
		switch {
		case errors.Is(err, cost.ErrNotFound):
			// the error names the state directory: not told
			s.writeError(w, r, http.StatusNotFound, apierror.Public("this runtime has no cost ledger yet", nil))
		case err != nil:
			s.writeError(w, r, http.StatusInternalServerError, err)
		default:
			writeJSON(w, http.StatusOK, rep)
		}
	}
}
