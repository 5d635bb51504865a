package kubesandbox_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
)

// A claim's name comes from its owner, so a runtime that restarts finds
// its claims again; an owner that is not a name already gets a hash of
// itself, so two owners never share a claim.
func ExampleClaimName() {
	fmt.Println(kubesandbox.ClaimName("r-0123456789abcdef0123"))
	fmt.Println(kubesandbox.ClaimName("r-Same"))
	fmt.Println(kubesandbox.ClaimName("r-same"))
	// Output:
	// sw-r-0123456789abcdef0123
	// sw-r-same-7ae16105
	// sw-r-same
}
