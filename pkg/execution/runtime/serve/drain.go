package serve

import (
	"fmt"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/runtime"
)

// drainClaims waits until the claims rt holds are released or deadline
// passes, saying which in the log.
func drainClaims(c Config, rt *runtime.Runtime, deadline time.Time) {
	start := time.Now()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		n := rt.OpenClaims()
		if n == 0 {
			fmt.Fprintf(c.Log, "drained: no claim open after %.1fs\n", time.Since(start).Seconds())
			return
		}
		if !time.Now().Before(deadline) {
			fmt.Fprintf(c.Log, "drain deadline (%s): %d claims still open\n", c.DrainTimeout, n)
			return
		}
		<-t.C
	}
}
