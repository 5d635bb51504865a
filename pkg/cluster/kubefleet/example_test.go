package kubefleet_test

import (
	"context"
	"fmt"

	"github.com/slipway-dev/slipway/pkg/cluster/kubeapply"
	"github.com/slipway-dev/slipway/pkg/cluster/kubefleet"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/kubeconfig"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
)

// A rollout driven on a cluster: the fleet applies the render of the
// branch head at each step and reads the cluster back. (It needs a
// cluster, so it is compiled, not run; TestRolloutOnNode runs it.)
func Example() {
	ctx := context.Background()
	cfg, ns, err := kubeconfig.Load("kubeconfig")
	if err != nil {
		fmt.Println(err)
		return
	}
	applierRepo, _ := gitops.Open(ctx, "config.git")
	a, _ := kubeapply.New(cfg, kubeapply.WithNamespace(ns))
	ra, _ := kubefleet.NewRenderApplier(applierRepo, "main", "agents", a)
	var prover kubefleet.Prover // the runtime on the Kubernetes sandbox backend
	fleet, err := kubefleet.New(cfg, "agents", ns, kubefleet.WithApplier(ra), kubefleet.WithProver(prover))
	if err != nil {
		fmt.Println(err)
		return
	}
	driverRepo, _ := gitops.Open(ctx, "config.git")
	d := &rollout.Driver{Repo: driverRepo, Pool: "agents", Fleet: fleet, UnsignedEvidence: true}
	r, err := d.Start(ctx, "g-…", false)
	if err == nil {
		r, err = d.Drive(ctx, r.ID)
	}
	fmt.Println(r, err)
}
