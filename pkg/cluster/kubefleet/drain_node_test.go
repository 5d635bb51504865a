//go:build linux

package kubefleet_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/cluster/kubefleet"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/testharness/gittest"
)

// Rollout step 5 with onDrainDeadline: checkpoint on a real node: a run
// the runtime on the Kubernetes backend holds open on g1, with files
// written in its pod, is at the drain deadline suspended (its workspace
// checkpointed out of the pod, its claim deleted) and resumed in a pod of
// g2 through the fleet (the runtime that holds the run moves it); the
// drain's commit names the run and its checkpoint, the owner's request key
// adopts the run on g2 (attempt 2) and every file is as it was.
func TestDrainCheckpointOnNode(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "kd", 1, func(s *pool.Spec) {
		deadlines(s, 3*time.Minute)
		s.DrainDeadline, s.OnDrainDeadline = pool.Duration{Duration: 3 * time.Second}, "checkpoint"
	}, blocking("g1"), blocking("g2"))
	g1, g2 := w.gens[0].ID, w.gens[1].ID
	w.syncReady(0, 1, 3*time.Minute)
	c := w.prover.c
	claim := runtimeapi.ClaimBody{Tenant: "acme", RequestKey: "drain-checkpoint-on-node"}
	var grant *runtimeapi.Grant
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		g, err := c.Claim(ctx, w.poolName, claim)
		if err == nil {
			grant = g
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim on g1: %v", err)
		}
	}
	if grant.Generation != g1 {
		t.Fatalf("grant %+v, want one of g1", grant)
	}
	exec := func(g *runtimeapi.Grant, script string) string {
		t.Helper()
		res, err := c.Exec(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, Argv: []string{"sh", "-c", "cd /workspace && " + script}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec %q: %+v, %v", script, res, err)
		}
		return res.Stdout
	}
	const hashes = `find . -type f | sort | xargs sha256sum; find . -type l | sort`
	exec(grant, `mkdir -p src data && echo 'package main' > src/main.go && head -c 200000 /dev/urandom > data/blob.bin && ln -s src/main.go link`)
	want := exec(grant, hashes)

	d := w.driver(w.fleet)
	if _, err := d.Start(ctx, g2, false); err != nil {
		t.Fatal(err)
	}
	r, err := w.driver(w.fleet).Run(ctx)
	if err != nil || r.Status != pool.RolloutSucceeded {
		t.Fatalf("rollout: %+v %v", r, err)
	}
	log := gittest.Git(t, w.dir, "log", "--format=%B", "main")
	m := regexp.MustCompile(`Checkpointed: ` + grant.RunID + ` at (sha256:[0-9a-f]{64}), resumed on ` + g2 + ` in sandbox (\S+) `).FindStringSubmatch(log)
	if m == nil || !strings.Contains(log, "checkpointed 1 run and resumed 1 on "+g2) {
		t.Fatalf("the drain's commit does not name the run and its checkpoint:\n%s", log)
	}
	digest, pod := m[1], m[2]

	g, err := c.Claim(ctx, w.poolName, claim)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Adopted || g.RunID != grant.RunID || g.Generation != g2 || g.AllocationAttempt != 2 || g.SandboxID != pod || g.SandboxID == grant.SandboxID {
		t.Fatalf("the owner's grant after the drain: %+v (before: %+v)", g, grant)
	}
	if got := exec(g, hashes); got != want {
		t.Fatalf("files after the drain:\n%s\nwant:\n%s", got, want)
	}
	if man, err := c.Run(ctx, grant.RunID); err != nil || man.Generation != g2 || man.WorkspaceCheckpointID != digest {
		t.Fatalf("manifest after the drain: %+v, %v", man, err)
	}
	if _, err := w.dyn.Resource(kubefleet.Sandboxes).Namespace(w.ns).Get(ctx, grant.SandboxID, metav1.GetOptions{}); err == nil {
		t.Errorf("g1's sandbox %s of the moved run is still there", grant.SandboxID)
	}
	if err := c.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g.Token}); err != nil {
		t.Fatal(err)
	}
}
