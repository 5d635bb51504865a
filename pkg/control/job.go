package control

import (
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// isActive says a job in state s holds (or is about to hold) a slot of its
// tenant's concurrency.
func isActive(s controlapi.State) bool {
	return s == controlapi.Admitted || s == controlapi.Allocating || s == controlapi.Running || s == controlapi.Canceling
}

func tp(t time.Time) *time.Time { t = t.UTC(); return &t }
