package console

import (
	"errors"
	"net/http"
	"slices"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// PackageRuns is how many runs of each runtime the page of a package
// lists.
const PackageRuns = 200

type runsData struct {
	// Package, when set, is the package the runs share.
	Package string
	Limit   int
	Runs    []string
}

// packagesErr is why a run's packages are not shown, said to an
// operator: the runtime's refusal as it gave it, else a sentence.
func packagesErr(err error) string {
	var re *runtimeapi.APIError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &re) && re.Status < 500:
		return Clean(re.Error()) + " (a runtime older than GET /v1/runs/{run}/packages?)"
	default:
		return "the runtime did not answer"
	}
}

// runsWithPackage lists the runs (of every runtime) made of an artifact
// whose recorded packages hold ?package=name@version: the runtime's own
// package query (GET /v1/runs?package=).
func (s *Server) runsWithPackage(w http.ResponseWriter, r *http.Request, ss *session) {
	v := r.URL.Query().Get("package")
	p, err := runmanifest.ParsePackage(v)
	if err != nil {
		s.fail(w, r, ss, http.StatusBadRequest, "runs with package "+Clean(v)+": not name@version", nil)
		return
	}
	var ids []string
	for _, rt := range s.runtimes {
		got, err := rt.Client.Query(r.Context(), runmanifest.Query{Package: p.String(), Limit: PackageRuns})
		if err != nil {
			s.fail(w, r, ss, http.StatusBadGateway, "runs with package "+p.String()+" on runtime "+rt.Name, err)
			return
		}
		ids = append(ids, got...)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	s.render(w, r, http.StatusOK, "runs", s.page(ss, "Runs with "+p.String(), runsData{Package: p.String(), Limit: PackageRuns, Runs: ids}))
}

// runPackages lists every package of a run's artifacts, as the runtime
// that holds the run recorded them.
func (s *Server) runPackages(w http.ResponseWriter, r *http.Request, ss *session) {
	id := r.PathValue("id")
	_, rc, err := s.manifest(r.Context(), id)
	if err != nil {
		s.fail(w, r, ss, http.StatusBadGateway, "run "+id, err)
		return
	}
	pk, err := rc.RunPackages(r.Context(), id)
	if err != nil {
		s.fail(w, r, ss, http.StatusBadGateway, "packages of run "+id, err)
		return
	}
	s.render(w, r, http.StatusOK, "run-packages", s.page(ss, "Packages of run "+pk.Run, pk))
}
