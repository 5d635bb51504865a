package incidents

import (
	"context"

	"github.com/slipway-dev/slipway/pkg/execution/runs"
)

// Runtime is the report a runtime serves on GET /v1/incidents: what its
// own records show, read at the time of the call. Its run manifests are
// read (FromRuns) when its store lists its newest runs (RunLister: both
// stores do), its cleanup reconciler's
// records (FromCleanup) when it runs one (cr nil: none). A kind neither
// covers is in the report with Sourced false. It is the report `slipway
// incidents --state DIR` makes of the same records, without the control
// plane's.
func Runtime(ctx context.Context, rs runs.Store, cr CleanupRecords) (*Report, error) {
	var sources []Source
	if rl, ok := rs.(RunLister); ok {
		sources = append(sources, FromRuns(rl, nil))
	}
	if cr != nil {
		sources = append(sources, FromCleanup(cr))
	}
	return Collect(ctx, sources...)
}
