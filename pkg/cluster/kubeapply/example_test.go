package kubeapply_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/slipway-dev/slipway/pkg/cluster/kubeapply"
	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/pkg/kubeconfig"
)

// Render a checked-out config repository's pool (verified against its
// policies/verification.yaml), apply it to the cluster of a kubeconfig and
// wait for its warm pools. It needs a cluster, so it is compiled, not run;
// the tests run the same flow against a real API server and node.
func Example() {
	ctx := context.Background()
	tree, err := render.OpenDir("config")
	if err != nil {
		log.Fatal(err)
	}
	res, err := render.Pool(ctx, tree, "agents", "0123456789abcdef0123456789abcdef01234567")
	if err != nil {
		log.Fatal(err) // a generation that does not verify renders nothing
	}
	cfg, namespace, err := kubeconfig.Load("kubeconfig")
	if err != nil {
		log.Fatal(err)
	}
	a, err := kubeapply.New(cfg, kubeapply.WithNamespace(namespace))
	if err != nil {
		log.Fatal(err)
	}
	changes, err := a.Apply(ctx, res)
	if err != nil {
		log.Fatal(err) // a conflict names the object, the field and the other manager
	}
	for _, c := range changes.Changes {
		fmt.Println(c) // SandboxTemplate/sandboxes/agents-18dccbf123b1 Created
	}
	if _, err := a.Wait(ctx, changes.WarmPools, 5*time.Minute); err != nil {
		log.Fatal(err)
	}
}
