package main

import (
	"fmt"
	"path/filepath"
	"time"
)

// kubeRollout rolls the pool out to g2 on the cluster while a long task
// runs on a pod of g1: routing moves to g2, the drain waits for the task's
// claim to be released, then g1's warm pool goes. It returns the long
// task's result.
func kubeRollout(sh shell, rt *runtimeProc, kc, g2 string) (*claimResult, error) {
	section("long task", "a task on a pod of g1 that runs through the rollout (started in the background)")
	long, longErr := rt.background(sh, "echo long task started on $SLIPWAY_GENERATION in pod $(hostname); sleep 20; echo long task done", 3*time.Second)

	section("rollout start", "to g2 on the cluster: each step applies the render and reads the cluster back; proofs through the runtime")
	drive := []string{"rollout", "start", "--repo", "config.git", "--pool", "agents", "--to", g2,
		"--kubeconfig", kc, "--prover", rt.server, "--token-file", rt.token,
		"--sign-key", filepath.Join("policies", "release.key"), "--wait"}
	driven, err := sh.start(drive)
	if err != nil {
		return nil, err
	}
	// Show the drain: claims go to g2, the long task keeps g1 draining.
	if err := sh.showDrain(driven, long, longErr, "claims go to g2 now; g1 drains while the long task's claim is open"); err != nil {
		return nil, err
	}
	res, err := awaitLong(long, longErr)
	if err != nil {
		return nil, err
	}
	select {
	case err := <-driven:
		if err != nil {
			return nil, fmt.Errorf("rollout start --wait: %v", err)
		}
	case <-time.After(2 * time.Minute):
		return nil, fmt.Errorf("the rollout did not end")
	}
	return res, nil
}
