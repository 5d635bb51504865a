package console

import (
	"errors"
	"net/http"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

type incidentsData struct {
	// Served is false when the control plane serves no incidents.
	Served bool
	Report *controlapi.Incidents
	// Runtimes are the console's runtimes, whose cleanup records hold
	// the deletes that timed out (the cleanup page).
	Runtimes int
}

// incidents shows the control plane's incidents by kind (GET
// /v1/incidents, with the operator's own token).
func (s *Server) incidents(w http.ResponseWriter, r *http.Request, ss *session) {
	rep, err := ss.api.Incidents(r.Context())
	var ae *controlapi.APIError
	d := incidentsData{Runtimes: len(s.runtimes)}
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
	case err != nil:
		s.fail(w, r, ss, http.StatusBadGateway, "incidents", err)
		return
	default:
		d.Served, d.Report = true, rep
	}
	s.render(w, r, http.StatusOK, "incidents", s.page(ss, "Incidents", d))
}
