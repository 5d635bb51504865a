package runtime

import (
	"context"
	"net/http"

	"github.com/slipway-dev/slipway/pkg/api/incidentreport"
)

// WithIncidents serves GET /v1/incidents from report: the incidents the
// runtime's own records show (its run manifests and its cleanup
// reconciler's records), in the shape both servers serve.
// The program composes it (pkg/control/incidents reads those records; the
// runtime does not import it). Without it the route answers 404.
func WithIncidents(report func(ctx context.Context) (*incidentreport.Report, error)) ServerOption {
	return func(o *serverOptions) { o.incidents = report }
}

// incidentRoutes adds GET /v1/incidents (the runtime's token), when the
// program gave a report.
func (s *Server) incidentRoutes(report func(ctx context.Context) (*incidentreport.Report, error)) {
	if report == nil {
		return
	}
	s.mux.Handle("GET /v1/incidents", s.auth(func(w http.ResponseWriter, r *http.Request) {
		v, err := report(r.Context())
		if err != nil {
			s.writeError(w, r, http.StatusInternalServerError, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}))
}
