package incidents

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/slipway-dev/slipway/pkg/api/incidentreport"
)

// Kind is one incident of the seed's table-top.
type Kind string

// The kinds, in the seed's order.
const (
	AgentHang        Kind = "agent_hangs"
	WorkerCrash      Kind = "worker_crashes_after_create"
	CredentialExpiry Kind = "credential_expires"
	PolicyLag        Kind = "policy_propagation_lags"
	ExportFailure    Kind = "artifact_export_fails"
	// CleanupUnknown: a delete that timed out or failed, tracked by the
	// reconciler (its records come through a Source of its own).
	CleanupUnknown Kind = "delete_times_out"
)

// Kinds lists every kind, in the order reports show them.
var Kinds = []Kind{AgentHang, WorkerCrash, CredentialExpiry, PolicyLag, ExportFailure, CleanupUnknown}

// Title says what a kind is in words.
func (k Kind) Title() string {
	switch k {
	case AgentHang:
		return "agent hangs: stopped at its deadline"
	case WorkerCrash:
		return "worker crashes after create: the sandbox found by request key"
	case CredentialExpiry:
		return "credential expires: expired while its run was open, or renewed before"
	case PolicyLag:
		return "policy propagation lags: claims refused on a stale view"
	case ExportFailure:
		return "artifact export fails: deliveries failed or retrying"
	case CleanupUnknown:
		return "delete times out: cleanup unknown"
	}
	return string(k)
}

// Incident is one job or run that shows an incident kind, with the
// evidence of its durable records; Fact is one named piece of evidence.
// They are the contract's (incidentreport): a report is served and
// printed as it is collected.
type (
	Incident = incidentreport.Incident
	Fact     = incidentreport.Fact
)

// add appends a piece of evidence to i.
func add(i *Incident, name, format string, args ...any) {
	i.Evidence = append(i.Evidence, Fact{Name: name, Value: fmt.Sprintf(format, args...)})
}

// Source lists the incidents its records show. FromControl and FromRuns
// are the sources of this package; the reconciler's records of cleanups
// whose outcome is unknown are another.
type Source interface {
	Incidents(ctx context.Context) ([]Incident, error)
}

// SourceFunc makes a function a Source.
type SourceFunc func(ctx context.Context) ([]Incident, error)

// Incidents implements Source.
func (f SourceFunc) Incidents(ctx context.Context) ([]Incident, error) { return f(ctx) }

// Covering is a Source that says which kinds its records can show.
// Collect marks a kind that no such source covers (KindReport.Sourced
// false): an empty list there means "not looked at", not "none".
type Covering interface {
	Covers() []Kind
}

// covering is a Source with the kinds it covers.
type covering struct {
	SourceFunc
	kinds []Kind
}

func (c covering) Covers() []Kind { return c.kinds }

// Report is every kind with the incidents found, in Kinds' order;
// KindReport is one kind's incidents, newest first (incidentreport).
type (
	Report     = incidentreport.Report
	KindReport = incidentreport.Kind
)

// Collect asks every source and groups what they found by kind. A source
// that fails fails the report (a view that silently misses a record is
// worse than none).
func Collect(ctx context.Context, sources ...Source) (*Report, error) {
	by := map[Kind][]Incident{}
	sourced := map[Kind]bool{}
	var errs []error
	for _, s := range sources {
		if c, ok := s.(Covering); ok {
			for _, k := range c.Covers() {
				sourced[k] = true
			}
		}
		found, err := s.Incidents(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, i := range found {
			by[Kind(i.Kind)] = append(by[Kind(i.Kind)], i)
			sourced[Kind(i.Kind)] = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r := &Report{}
	kinds := append([]Kind(nil), Kinds...)
	for k := range by {
		if !contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	for _, k := range kinds {
		is := by[k]
		sort.SliceStable(is, func(a, b int) bool { return is[a].At.After(is[b].At) })
		if is == nil {
			is = []Incident{}
		}
		for _, i := range is {
			if !i.Terminal {
				r.Open++
			}
		}
		r.Kinds = append(r.Kinds, KindReport{Kind: string(k), Title: k.Title(), Sourced: sourced[k], Incidents: is})
	}
	return r, nil
}

func contains(ks []Kind, k Kind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}
