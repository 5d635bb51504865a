//go:build linux

package restart_test

import (
	"testing"

	"github.com/slipway-dev/slipway/deploy/internal/harness"
)

// Both runtime replicas restart at once (a node drained, a rollout
// restart with maxUnavailable 2, an OOM of both) with jobs in flight:
// TestInClusterHAJobs's flow with both runtime pods deleted together and
// the control plane left alone. No accepted job is lost, none runs twice,
// and the jobs still queued run once the new runtime pods are Ready (it
// logs the time from the deletion to the next job running).
func TestInClusterBothRuntimesRestart(t *testing.T) {
	r := harness.HADeletion(t, 10, map[string]int{"slipway-runtime": 2})
	if r.NextRunning < 0 {
		t.Errorf("no job ran after both runtime pods were deleted: %v", r.ByState)
	}
}
