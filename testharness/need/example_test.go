package need_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/testharness/need"
)

// A test that needs a real server says so first thing; under go test
// -short it is left out with this reason (need.Short(t, "a real
// PostgreSQL")), and a missing binary, variable or privilege skips it on a
// developer's machine and fails it under CI=true (need.Binary,
// need.Env, need.Root).
func ExampleReason() {
	fmt.Println(need.Reason("a real PostgreSQL"))
	// Output: left out by -short: needs a real PostgreSQL
}
