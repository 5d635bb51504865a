//go:build failpoints

package rollout

import (
	"os"
	"syscall"
)

// FailpointEnv names the failpoint at which a driver built with -tags
// failpoints kills itself with SIGKILL (as kill -9 would), for the tests
// that resume a driver from every transition.
const FailpointEnv = "SLIPWAY_ROLLOUT_FAILPOINT"

func init() {
	failpointHook = func(name string) {
		if want := os.Getenv(FailpointEnv); want != "" && want == name {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}
