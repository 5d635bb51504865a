//go:build linux

package ha_test

import (
	"testing"

	"github.com/slipway-dev/slipway/deploy/internal/harness"
)

// haJobs is how many jobs are in flight when the pods are deleted.
const haJobs = 10

// The HA install with jobs in flight: overlays/ha (two replicas of each
// plane) installed as TestInClusterJob installs overlays/single; 10 jobs
// submitted to the control plane's Service (each sleeps 6 s, tenant acme
// runs 4 at once, so some run and the rest wait); once one runs, one
// control-plane pod and one runtime pod are deleted (of each plane, the
// replica whose log names a running job's run, if one does) (as kubectl delete pod
// does, with their grace period). No accepted job is lost (each is still
// there and ends terminal, or visibly unknown with an owner and a
// deadline) and none runs twice (the run store, read through the runtime's
// Service, holds at most one run per job whose runner fetched the
// command). It logs the time from the deletion to the next job admitted
// (B15's figure, from one run). The runtime pod drains (it refuses new
// claims with a retryable answer, serves the claims it holds until they
// are released, and the other replica passes their requests on to it), so
// no job may end unknown for a runtime's reason (exec_unconfirmed,
// claim_released): 3 runs out of 3 held that before it was required
// (docs/install-kubernetes.md).
func TestInClusterHAJobs(t *testing.T) {
	res := harness.HADeletion(t, haJobs, harness.OnePodOfEach)
	for _, u := range res.RuntimeUnknown {
		t.Errorf("a job ended unknown for the runtime pod's deletion, which drains: %s", u)
	}
}
