package console

import (
	"errors"
	"net/http"
	"slices"
	"sort"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// incidentSource is one server whose incidents the page read, or why it
// shows none.
type incidentSource struct {
	// Name is "control plane" or "runtime NAME".
	Name string
	// Served is false when the server serves no incidents (404: an older
	// server, or a control plane started without them).
	Served bool
}

// sourcedIncident is an incident and the server whose records show it.
type sourcedIncident struct {
	Source string
	controlapi.Incident
}

// incidentKind is one kind's incidents from every source, newest first.
type incidentKind struct {
	Kind, Title string
	// SourcedBy names the sources that read records of this kind: an
	// empty list of incidents is "none" only when it is not empty.
	SourcedBy []string
	Incidents []sourcedIncident
}

type incidentsData struct {
	Sources []incidentSource
	Kinds   []incidentKind
	// Open counts the incidents whose outcome is not confirmed, of every
	// source.
	Open int
}

// incidents shows, per kind, the incidents of the control plane (GET
// /v1/incidents, with the operator's own token) and of each runtime (its
// GET /v1/incidents: its run manifests' and cleanup records'), each
// labelled with its source. A server that serves none is said so; one
// that fails fails the page, as the cleanup page does: a view that misses
// a source without saying so is worse than none.
func (s *Server) incidents(w http.ResponseWriter, r *http.Request, ss *session) {
	var d incidentsData
	byKind := map[string]*incidentKind{}
	var order []string
	add := func(source string, rep *controlapi.Incidents) {
		d.Open += rep.Open
		for _, k := range rep.Kinds {
			ik, ok := byKind[k.Kind]
			if !ok {
				ik = &incidentKind{Kind: k.Kind, Title: k.Title}
				byKind[k.Kind] = ik
				order = append(order, k.Kind)
			}
			if k.Sourced {
				ik.SourcedBy = append(ik.SourcedBy, source)
			}
			for _, i := range k.Incidents {
				ik.Incidents = append(ik.Incidents, sourcedIncident{Source: source, Incident: i})
			}
		}
	}
	rep, err := ss.api.Incidents(r.Context())
	var ae *controlapi.APIError
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		d.Sources = append(d.Sources, incidentSource{Name: "control plane"})
	case err != nil:
		s.fail(w, r, ss, http.StatusBadGateway, "incidents", err)
		return
	default:
		d.Sources = append(d.Sources, incidentSource{Name: "control plane", Served: true})
		add("control plane", rep)
	}
	for _, rt := range s.runtimes {
		name := "runtime " + rt.Name
		rep, err := rt.Client.Incidents(r.Context())
		var re *runtimeapi.APIError
		switch {
		case errors.As(err, &re) && re.Status == http.StatusNotFound:
			d.Sources = append(d.Sources, incidentSource{Name: name})
		case err != nil:
			s.fail(w, r, ss, http.StatusBadGateway, "incidents of "+name, err)
			return
		default:
			d.Sources = append(d.Sources, incidentSource{Name: name, Served: true})
			add(name, rep)
		}
	}
	for _, k := range order {
		ik := byKind[k]
		sort.SliceStable(ik.Incidents, func(a, b int) bool { return ik.Incidents[a].At.After(ik.Incidents[b].At) })
		ik.SourcedBy = slices.Compact(ik.SourcedBy)
		d.Kinds = append(d.Kinds, *ik)
	}
	s.render(w, r, http.StatusOK, "incidents", s.page(ss, "Incidents", d))
}
