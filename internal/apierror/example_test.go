package apierror_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/slipway-dev/slipway/internal/apierror"
)

// A validation error is told whole; a failure inside the server is told
// as a reason and an error id, and the detail (here a host path and a
// command line) is for the log only, under the same id.
func ExampleDecide() {
	a := apierror.Decide(errors.New(`pool "agents": limits.memory "12Q": not a size`), true)
	fmt.Println(a.Reason, a.Hidden())

	failure := fmt.Errorf("create sandbox: %w", errors.New("bwrap --bind /var/lib/slipway/sandboxes/sb-1 / ...: exit status 1"))
	a = apierror.Decide(failure, false)
	fmt.Println(strings.Replace(a.Reason, a.ID, "ID", 1), strings.Contains(a.Reason, "/var/lib"))
	fmt.Println("for the log, under the id:", failure)

	a = apierror.Decide(fmt.Errorf("claim: %w", apierror.Public("the sandbox backend is not ready", failure)), false)
	fmt.Println(strings.Replace(a.Reason, a.ID, "ID", 1))
	// Output:
	// pool "agents": limits.memory "12Q": not a size false
	// internal error (error id ID) false
	// for the log, under the id: create sandbox: bwrap --bind /var/lib/slipway/sandboxes/sb-1 / ...: exit status 1
	// the sandbox backend is not ready (error id ID)
}
