package delivery_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/pkg/control/internal/delivery"
)

// The output worker's defaults, where a configuration says nothing.
func ExampleConfig_WithDefaults() {
	c := delivery.Config{Poll: 0, JobsPerDestination: 2}.WithDefaults()
	fmt.Println(c.Poll, c.Lease, c.AttemptTimeout, c.BackoffBase, c.BackoffMax, c.RetryAfterCap, c.JobsPerDestination)
	// Output: 200ms 30s 10s 500ms 5m0s 10m0s 2
}
