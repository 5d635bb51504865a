package console

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// CostWindows are the windows the cost page offers, the first the
// default.
var CostWindows = []time.Duration{24 * time.Hour, time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour}

// orUnknown is a price or cost, or "unknown" (never 0) when it is nil.
func orUnknown(v *float64) string {
	if v == nil {
		return "unknown"
	}
	return strconv.FormatFloat(*v, 'f', 4, 64)
}

// costRuntime is one runtime's cost of a pool, or why there is none.
type costRuntime struct {
	Name string
	// NoLedger says why the runtime shows no cost ("" when it does).
	NoLedger string
	Cost     *runtimeapi.PoolCost
}

type costData struct {
	Pool     string
	Window   time.Duration
	Windows  []time.Duration
	Runtimes []costRuntime
}

// cost shows a pool's time and cost by state, read from each runtime's
// cost ledger (GET /v1/pools/{pool}/cost) for a window up to now.
func (s *Server) cost(w http.ResponseWriter, r *http.Request, ss *session) {
	p := r.PathValue("pool")
	win := CostWindows[0]
	if v := r.URL.Query().Get("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			s.fail(w, r, ss, http.StatusBadRequest, "cost of pool "+p+": window="+Clean(v)+" is not a positive duration (24h, 1h)", nil)
			return
		}
		win = d
	}
	now := s.now()
	d := costData{Pool: p, Window: win, Windows: CostWindows}
	for _, rt := range s.runtimes {
		c, err := rt.Client.PoolCost(r.Context(), p, now.Add(-win), now)
		var re *runtimeapi.APIError
		switch {
		case errors.As(err, &re) && re.Status == http.StatusNotFound:
			d.Runtimes = append(d.Runtimes, costRuntime{Name: rt.Name, NoLedger: "this runtime keeps no cost ledger, or not yet: " + Clean(re.Reason)})
		case err != nil:
			s.fail(w, r, ss, http.StatusBadGateway, "cost of pool "+p+" on runtime "+rt.Name, err)
			return
		default:
			d.Runtimes = append(d.Runtimes, costRuntime{Name: rt.Name, Cost: c})
		}
	}
	s.render(w, r, http.StatusOK, "cost", s.page(ss, "Cost of pool "+p, d))
}
