package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// kubeRollout promotes g2 and rolls the pool out to it on the cluster
// while a task holds a claim on a pod of g1, taken before the promotion: routing moves to g2, the drain waits for the
// task's claim, which the task releases only once the drain has been
// shown (no race with the rollout's pace), then g1's warm pool goes. It
// returns the long task's claim result.
func kubeRollout(ctx context.Context, sh shell, rt *runtimeProc, kc, g1, g2 string) (*claimResult, error) {
	section("long task", "a task's claim on a pod of g1, held open through the rollout (through the runtime's API: claim, exec, and release after the drain)")
	tok, err := os.ReadFile(rt.token)
	if err != nil {
		return nil, err
	}
	api, err := runtimeapi.NewClient(rt.server, strings.TrimSpace(string(tok)))
	if err != nil {
		return nil, err
	}
	g, err := claimOn(ctx, api, g1)
	if err != nil {
		return nil, err
	}
	res := &claimResult{RunID: g.RunID, SandboxID: g.SandboxID, Generation: g.Generation, Warm: g.Warm}
	released := false
	defer func() {
		if !released {
			_ = api.Release(context.WithoutCancel(ctx), g.RunID, runtimeapi.ReleaseBody{Token: g.Token})
		}
	}()
	if err := longExec(ctx, api, g, res, "echo long task started on $SLIPWAY_GENERATION in pod $(hostname)"); err != nil {
		return nil, err
	}
	section("promote", "g2 becomes the target (the rollout makes it active)")
	if err := sh.run(0, "promote", "--repo", "config.git", "--pool", "agents", "--generation", "g2.yaml"); err != nil {
		return nil, err
	}

	section("rollout start", "to g2 on the cluster: each step applies the render and reads the cluster back; proofs through the in-cluster runtime")
	drive := []string{"rollout", "start", "--repo", "config.git", "--pool", "agents", "--to", g2,
		"--kubeconfig", kc, "--namespace", kubeNamespace, "--prover", rt.server, "--token-file", rt.token,
		"--sign-key", filepath.Join("policies", "release.key"), "--wait"}
	driven, err := sh.start(drive)
	if err != nil {
		return nil, err
	}
	if err := sh.showKubeDrain(driven, g.RunID); err != nil {
		return nil, err
	}
	if err := longExec(ctx, api, g, res, "echo long task done on $SLIPWAY_GENERATION, its claim still open after routing moved to g2"); err != nil {
		return nil, err
	}
	code := res.ExitCode
	if err := api.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g.Token, ExitCode: &code}); err != nil {
		return nil, fmt.Errorf("release the long task's claim %s: %w", g.RunID, err)
	}
	released = true
	fmt.Printf("\n  the long task released its claim: run %s on %s, exit %d\n", res.RunID, res.Generation, res.ExitCode)
	for _, l := range strings.Split(strings.TrimSpace(res.Output), "\n") {
		fmt.Printf("  > %s\n", l)
	}
	select {
	case err := <-driven:
		if err != nil {
			return nil, fmt.Errorf("rollout start --wait: %v", err)
		}
	case <-time.After(3 * time.Minute):
		return nil, fmt.Errorf("the rollout did not end within 3m of the long task's release")
	}
	return res, nil
}

// claimOn claims a sandbox of pool agents until the runtime grants
// generation want (releasing any other), at most 60 s.
func claimOn(ctx context.Context, api *runtimeapi.Client, want string) (*runtimeapi.Grant, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		g, err := api.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "demo"})
		if err == nil && g.Generation == want {
			fmt.Printf("  claim %s in sandbox %s, generation %s, warm %v\n", g.RunID, g.SandboxID, g.Generation, g.Warm)
			return g, nil
		}
		if err == nil {
			_ = api.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g.Token})
			err = fmt.Errorf("granted %s", g.Generation)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no claim on %s within 60s: %w", want, err)
		}
		time.Sleep(time.Second)
	}
}

// longExec runs script in the long task's claim and adds its output to res.
func longExec(ctx context.Context, api *runtimeapi.Client, g *runtimeapi.Grant, res *claimResult, script string) error {
	r, err := api.Exec(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, Argv: []string{"sh", "-c", script}})
	if err != nil {
		return fmt.Errorf("the long task's command in run %s: %w", g.RunID, err)
	}
	fmt.Printf("  > %s", r.Stdout)
	res.Output += r.Stdout
	res.ExitCode = r.ExitCode
	if r.ExitCode != 0 {
		return fmt.Errorf("the long task's command in run %s exited %d: %s", g.RunID, r.ExitCode, r.Stderr)
	}
	return nil
}

// showKubeDrain waits (at most 3 minutes: the warm step waits for g2's
// pods) until the rollout driven in the background drains with run open,
// and shows its status then. The rollout ending first is an error.
func (sh shell) showKubeDrain(driven <-chan error, run string) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		b, err := exec.Command(sh.bin, "rollout", "status", "--repo", filepath.Join(sh.dir, "config.git"), "--pool", "agents", "--output", "json").Output()
		if err == nil {
			var st struct {
				Phase        string
				DrainingRuns []string
			}
			// The fleet names a run by its run id (its SandboxClaim's owner).
			if json.Unmarshal(b, &st) == nil && st.Phase == "drain" && contains(st.DrainingRuns, run) {
				section("rollout status", "claims go to g2 now; g1 drains while the long task's claim %s is open", run)
				return sh.run(0, "rollout", "status", "--repo", "config.git", "--pool", "agents")
			}
		}
		select {
		case err := <-driven:
			return fmt.Errorf("the rollout ended before the drain was shown: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no drain with run %s open within 3m", run)
		}
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// runtimeSync asks the in-cluster runtime to read config.git now (POST
// /v1/sync, at most 60 s) and says from which revision it serves, beside
// config.git's head: a sync that does not answer is named as such.
func runtimeSync(ctx context.Context, d *demo, rt *runtimeProc) error {
	section("runtime sync", "the in-cluster runtime reads config.git now (POST /v1/sync) and says which revision it serves")
	tok, err := os.ReadFile(rt.token)
	if err != nil {
		return err
	}
	api, err := runtimeapi.NewClient(rt.server, strings.TrimSpace(string(tok)))
	if err != nil {
		return err
	}
	head, err := exec.Command("git", "-C", filepath.Join(d.work, "config.git"), "rev-parse", "main").Output()
	if err != nil {
		return fmt.Errorf("config.git's head: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	rev, err := api.Sync(sctx)
	if err != nil {
		return fmt.Errorf("the in-cluster runtime's sync of config.git (head %s): %w", strings.TrimSpace(string(head)), err)
	}
	fmt.Printf("  serving from %s; config.git's head is %s\n", rev, strings.TrimSpace(string(head)))
	return nil
}
