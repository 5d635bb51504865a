package runtimetest_test

import (
	"fmt"
	"strings"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

// Desired is the desired state a test hands the runtime's warm loop: one
// pool, its first generation active and the next warming, as a rollout in
// progress has them. In a test the generations come from a World
// (runtimetest.New(t, registrytest.NewInProcess(t)), then w.Generation),
// whose images are real; here they pin made-up digests.
func ExampleDesired() {
	pin := func(repo string, hex byte) generation.Pin {
		return generation.Pin{Image: "registry.example/" + repo + "@sha256:" + strings.Repeat(string(hex), 64)}
	}
	pins := map[generation.Kind]generation.Pin{generation.ControlPlane: pin("platform/control", 'a'),
		generation.Runner: pin("platform/runner", 'b'), generation.WorkspaceTemplate: pin("templates/busybox", 'c')}
	g1, err := generation.New("agents", nil, pins, &generation.Compatibility{
		ControlPlaneProtocol: generation.Range{Min: 1, Max: 1}, RunnerProtocol: generation.Range{Min: 1, Max: 1}})
	if err != nil {
		panic(err)
	}
	pins[generation.WorkspaceTemplate] = pin("templates/busybox", 'd')
	g2, err := generation.New("agents", g1, pins, nil)
	if err != nil {
		panic(err)
	}
	d := runtimetest.Desired("rev-1", "agents", 2, g1, g2)
	p := d.Pools["agents"]
	for _, g := range p.State.Generations {
		fmt.Println(g.Sequence, g.State, g.WarmSize, p.Generations[g.ID] != nil)
	}
	fmt.Println(d.Revision, p.Pool.Spec.WarmSize)
	// Output:
	// 1 active 2 true
	// 2 warming 2 true
	// rev-1 2
}
