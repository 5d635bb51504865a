package leader_test

import (
	"fmt"
	"time"

	"k8s.io/client-go/rest"

	"github.com/slipway-dev/slipway/pkg/execution/leader"
)

// The verbs an election needs on its Lease's namespace (the runtime checks
// them at start with kubeaccess), and a Lease without a name refused before
// anything talks to the API server.
func Example() {
	for _, p := range leader.Permissions("slipway-system") {
		fmt.Println(p)
	}
	_, err := leader.New(&rest.Config{Host: "https://127.0.0.1:6443"}, leader.Config{Namespace: "slipway-system"})
	fmt.Println(err)
	_, err = leader.New(&rest.Config{Host: "https://127.0.0.1:6443"}, leader.Config{Namespace: "slipway-system", Name: "slipway-runtime", LeaseDuration: 500 * time.Millisecond})
	fmt.Println(err)
	// Output:
	// create leases.coordination.k8s.io in namespace slipway-system
	// get leases.coordination.k8s.io in namespace slipway-system
	// update leases.coordination.k8s.io in namespace slipway-system
	// leader: the Lease needs a namespace and a name
	// leader: lease duration 500ms: at least 1s
}
