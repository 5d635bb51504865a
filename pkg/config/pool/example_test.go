package pool_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/pkg/config/pool"
)

func Example() {
	fmt.Println(pool.PoolFile("agents"))
	fmt.Println(pool.GenerationFile("agents", "g-0123"))
	p := pool.Default("agents")
	fmt.Println(p.Spec.RequiredKinds, p.Spec.Network.Mode, p.Spec.OnDrainDeadline)
	// Output:
	// pools/agents/pool.yaml
	// pools/agents/generations/g-0123.yaml
	// [controlPlane runner workspaceTemplate] deny wait
}
