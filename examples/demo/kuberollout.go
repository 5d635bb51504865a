package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	fmt.Printf("$ slipway %s &\n", strings.Join(drive, " "))
	cmd := exec.Command(sh.bin, drive...)
	cmd.Dir = sh.dir
	cmd.Stdout, cmd.Stderr = indent{os.Stdout}, indent{os.Stdout}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	driven := make(chan error, 1)
	go func() { driven <- cmd.Wait() }()

	// Show the drain: claims go to g2, the long task keeps g1 draining.
	for shown := false; !shown; {
		b, err := exec.Command(sh.bin, "rollout", "status", "--repo", filepath.Join(sh.dir, "config.git"), "--pool", "agents", "--output", "json").Output()
		if err == nil {
			var st struct {
				Phase        string
				DrainingRuns []string
			}
			if json.Unmarshal(b, &st) == nil && st.Phase == "drain" && len(st.DrainingRuns) > 0 {
				section("rollout status", "claims go to g2 now; g1 drains while the long task's claim is open")
				if err := sh.run(0, "rollout", "status", "--repo", "config.git", "--pool", "agents"); err != nil {
					return nil, err
				}
				shown = true
			}
		}
		select {
		case err := <-driven:
			return nil, fmt.Errorf("the rollout ended before the drain was shown: %v", err)
		case err := <-longErr:
			return nil, err
		case res := <-long:
			return nil, fmt.Errorf("the long task ended (%s) before the rollout reached its drain: the machine is too slow for the demo's 20 s task", res.RunID)
		case <-time.After(300 * time.Millisecond):
		}
	}
	var res *claimResult
	select {
	case res = <-long:
	case err := <-longErr:
		return nil, err
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("the long task did not end")
	}
	fmt.Printf("\n  the long task ended: run %s on %s, exit %d\n", res.RunID, res.Generation, res.ExitCode)
	for _, l := range strings.Split(strings.TrimSpace(res.Output), "\n") {
		fmt.Printf("  > %s\n", l)
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
