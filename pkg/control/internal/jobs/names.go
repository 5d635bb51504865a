package jobs

import "github.com/slipway-dev/slipway/pkg/control/internal/store"

// The store's names the engine uses most, unexported here.
type (
	lease      = store.Lease
	batchAdmit = store.BatchAdmit
	slots      = store.Slots
	submission = store.Submission
)

var errSkip = store.ErrSkip
