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

// FailpointTraceEnv names a file to which such a driver appends the name
// of every failpoint it passes, one a line, so that a test can check that
// it kills the driver at each of them.
const FailpointTraceEnv = "SLIPWAY_ROLLOUT_FAILPOINT_TRACE"

func init() {
	failpointHook = func(name string) {
		if trace := os.Getenv(FailpointTraceEnv); trace != "" {
			if f, err := os.OpenFile(trace, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
				_, _ = f.WriteString(name + "\n")
				_ = f.Close()
			}
		}
		if want := os.Getenv(FailpointEnv); want != "" && want == name {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}
