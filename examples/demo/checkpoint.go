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

// drainDeadline is the pool's drain deadline in the rollout to g2: long
// enough for the status to show the drain, short enough for the demo.
const drainDeadline = "5s"

// workspaceHashes lists every file of the sandbox's workspace with its
// SHA-256, sorted: what the demo compares before and after a move.
const workspaceHashes = `cd /workspace && find . -type f | sort | xargs -r sha256sum`

// openRun is a run held open by its owner between commands, as an agent's
// harness holds it: claimed with a request key through the runtime's API,
// so that the owner finds its run again (adopts the new grant) after the
// runtime moved it.
type openRun struct {
	client *runtimeapi.Client
	claim  runtimeapi.ClaimBody
	grant  *runtimeapi.Grant
	// hashes and machineID are what the run's sandbox held before the move.
	hashes, machineID string
}

// openRunOnG1 sets the pool's drain to checkpoint at a short deadline and
// opens a run on the active generation that writes a few files into its
// workspace and stays open.
func (p *runtimeProc) openRunOnG1(ctx context.Context, sh shell) (*openRun, error) {
	section("open run", "a run on g1 writes files and stays open; at the drain deadline the rollout checkpoints it and resumes it on g2")
	if err := sh.run(0, "pool", "set", "--repo", "config.git", "--pool", "agents", "drainDeadline="+drainDeadline, "onDrainDeadline=checkpoint"); err != nil {
		return nil, err
	}
	tok, err := os.ReadFile(p.token)
	if err != nil {
		return nil, err
	}
	c, err := runtimeapi.NewClient(p.server, strings.TrimSpace(string(tok)))
	if err != nil {
		return nil, err
	}
	o := &openRun{client: c, claim: runtimeapi.ClaimBody{Tenant: "demo", RequestKey: "demo-open-run"}}
	if o.grant, err = c.Claim(ctx, "agents", o.claim); err != nil {
		return nil, fmt.Errorf("claim the open run: %w", err)
	}
	if _, err := o.exec(ctx, o.grant, `cd /workspace && mkdir -p repo/src && `+
		`printf 'package main\n\nfunc main() { println("hello") }\n' > repo/src/main.go && `+
		`echo 'step 1 of 2 done; step 2 after the rollout' > repo/NOTES.md && `+
		`head -c 1048576 /dev/urandom > repo/cache.bin`); err != nil {
		return nil, err
	}
	if o.hashes, err = o.exec(ctx, o.grant, workspaceHashes); err != nil {
		return nil, err
	}
	if o.machineID, err = o.exec(ctx, o.grant, "cat /etc/machine-id"); err != nil {
		return nil, err
	}
	fmt.Printf("  run %s on %s (sandbox %s, attempt %d) wrote into /workspace, then stays open; its owner (the demo, through the runtime's API) holds it:\n",
		o.grant.RunID, o.grant.Generation, o.grant.SandboxID, o.grant.AllocationAttempt)
	fmt.Print(quoteLines(o.hashes))
	return o, nil
}

// exec runs script in the run's sandbox with grant's token and returns its
// stdout; a command that fails is an error with its output.
func (o *openRun) exec(ctx context.Context, g *runtimeapi.Grant, script string) (string, error) {
	res, err := o.client.Exec(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, Argv: []string{"sh", "-c", script}})
	if err != nil {
		return "", fmt.Errorf("run %s: %q: %w", g.RunID, script, err)
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("run %s: %q exited %d: %s%s", g.RunID, script, res.ExitCode, res.Stdout, res.Stderr)
	}
	return res.Stdout, nil
}

// resumedOnG2 is the owner after the rollout: it claims again with its
// request key and gets the same run on g2 (a new sandbox and attempt),
// checks that every file of the workspace is as it was (the demo fails
// otherwise) and that the new sandbox has its own machine-id, asks
// question 6 about the run, and releases it. It returns the run's
// checkpoint.
func (o *openRun) resumedOnG2(ctx context.Context, sh shell, p *runtimeProc, g2 string) (string, error) {
	g, err := o.client.Claim(ctx, "agents", o.claim)
	if err != nil {
		return "", fmt.Errorf("the owner's claim after the rollout: %w", err)
	}
	if !g.Adopted || g.RunID != o.grant.RunID || g.Generation != g2 || g.AllocationAttempt <= o.grant.AllocationAttempt {
		return "", fmt.Errorf("the owner's claim after the rollout: run %s on %s attempt %d (adopted %v), want run %s resumed on %s",
			g.RunID, g.Generation, g.AllocationAttempt, g.Adopted, o.grant.RunID, g2)
	}
	section("resumed", "the owner claims again with its request key: the same run, now on g2, every file as it was")
	hashes, err := o.exec(ctx, g, workspaceHashes)
	if err != nil {
		return "", err
	}
	if hashes != o.hashes {
		return "", fmt.Errorf("run %s: the workspace after the resume on %s differs:\n%s\nbefore, on %s:\n%s", g.RunID, g2, hashes, o.grant.Generation, o.hashes)
	}
	machineID, err := o.exec(ctx, g, "cat /etc/machine-id")
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(machineID) == "" || machineID == o.machineID {
		return "", fmt.Errorf("run %s: machine-id %q after the resume, %q before: want the new sandbox's own", g.RunID, machineID, o.machineID)
	}
	fmt.Printf("  run %s on %s (sandbox %s, attempt %d, adopted): %d files, every sha256 as before; a new machine-id (the refresh phase ran after the restore)\n",
		g.RunID, g.Generation, g.SandboxID, g.AllocationAttempt, strings.Count(hashes, "\n"))

	section("question 6", "what state is durable for the moved run, its head, and was restore tested?")
	if err := sh.answer([]string{"checkpoint", "durable", g.RunID, "--runtime", p.server, "--token-file", p.token}, 0,
		[]string{"head: sha256:", "restore proved: ", " by " + runtimeapi.RestoredByDrain + " "}); err != nil {
		return "", err
	}
	d, err := o.client.Durable(ctx, g.RunID)
	if err != nil {
		return "", err
	}
	zero := 0
	if err := o.client.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g.Token, ExitCode: &zero}); err != nil {
		return "", fmt.Errorf("release run %s: %w", g.RunID, err)
	}
	return d.Head, nil
}

// showCheckpointDrain waits (at most 90 s) until the rollout to g2
// driven in the background drains g1 with the run open, and shows its
// status then. A drain whose deadline passed before a status was read (a
// busy machine) is said so, not an error: the rollout's steps show it
// afterwards. A rollout that failed returns at once (its driver says why).
func (sh shell) showCheckpointDrain(g2, run string) error {
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		b, err := exec.Command(sh.bin, "rollout", "status", "--repo", filepath.Join(sh.dir, "config.git"), "--pool", "agents", "--output", "json").Output()
		var st struct {
			Phase, Status string
			DrainingRuns  []string
			Rollout       *struct{ To string }
		}
		if err == nil && json.Unmarshal(b, &st) == nil && st.Rollout != nil && st.Rollout.To == g2 {
			past := st.Phase == "drain" || st.Phase == "remove" || st.Phase == "retain"
			switch {
			case st.Phase == "drain" && len(st.DrainingRuns) > 0 && st.Status == "running":
				section("rollout status", "claims go to g2 now; g1 drains until its deadline (%s), then its open run %s is checkpointed", drainDeadline, run)
				return sh.run(0, "rollout", "status", "--repo", "config.git", "--pool", "agents")
			case st.Status == "succeeded" || st.Status == "running" && past:
				fmt.Printf("  (the rollout is past its drain already, phase %s: a busy machine; its steps below show the drain)\n", st.Phase)
				return nil
			case st.Status != "running":
				return nil
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Errorf("no drain within 90s")
}

func quoteLines(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("  > " + l + "\n")
	}
	return b.String()
}

// showDrainCommit shows the rollout's commit of its drain deadline in the
// config repository (its trailers left out): the run it checkpointed, at
// which checkpoint, and the sandbox of g2 it was resumed in. A commit that
// does not name run is an error.
func showDrainCommit(work, run string) error {
	fmt.Println("$ git -C config.git log -1 --grep '^Slipway-Step: drain-checkpoint$' main")
	out, err := exec.Command("git", "-C", filepath.Join(work, "config.git"), "log", "-1", "--format=%h %s%n%b",
		"--grep=^Slipway-Step: drain-checkpoint$", "main").CombinedOutput()
	if err != nil {
		return fmt.Errorf("git log: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Checkpointed: "+run+" at sha256:") {
		return fmt.Errorf("the rollout's drain-checkpoint commit does not name run %s:\n%s", run, out)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !strings.HasPrefix(l, "Slipway-") {
			fmt.Println("  " + l)
		}
	}
	return nil
}
