//go:build linux

package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/testharness/kubetest"
	"github.com/slipway-dev/slipway/testharness/registrytest"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

// On a real node with the scheduler and agent-sandbox's controller,
// `slipway apply --wait` returns once the pool's warm pool is ready and
// prints it: the runner image's binary installed by the init container, a
// workspace image whose own command blocks.
func TestApplyWaitReadyOnNode(t *testing.T) {
	kubetest.SkipUnlessNode(t, "kube-scheduler", "agent-sandbox-controller")
	ctx := context.Background()
	host := registrytest.NewInProcess(t)
	w := runtimetest.New(t, host)
	sleeper := w.TemplateWithEntrypoint(t, "/bin/sleep", "86400")
	c := kubetest.New(t)
	if _, err := c.StartNode(ctx, host); err != nil {
		t.Fatal(err)
	}
	if err := c.StartScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.StartSandboxController(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	repo := filepath.Join(dir, "config.git")
	if err := gitops.InitBare(repo, "main"); err != nil {
		t.Fatal(err)
	}
	gen := filepath.Join(dir, "g0.yaml")
	if r := run(t, "", "generation", "create", "--pool", "agents", "--insecure-skip-verify", "--output", gen,
		"--pin", "controlPlane="+w.ControlPlane(t), "--pin", "runner="+w.Runner, "--pin", "workspaceTemplate="+sleeper,
		"--control-plane-protocol", "1", "--runner-protocol", "1"); r.code != 0 {
		t.Fatal(r)
	}
	if r := run(t, "", "promote", "--repo", repo, "--pool", "agents", "--generation", gen, "--insecure-skip-verify", "--activate"); r.code != 0 {
		t.Fatal(r)
	}
	r := run(t, "", "apply", "--repo", repo, "--pool", "agents", "--insecure-skip-verify", "--kubeconfig", c.Kubeconfig(),
		"--wait", "--timeout", "2m")
	if r.code != 0 || !strings.Contains(r.stdout, "SandboxWarmPool/default/agents-") {
		t.Fatalf("apply --wait: %+v; agent-sandbox-controller log:\n%s", r, c.Log("agent-sandbox-controller"))
	}
	// The default pool's warm size, all ready.
	last := strings.TrimSpace(r.stdout[strings.LastIndex(strings.TrimSpace(r.stdout), "\n")+1:])
	if !strings.HasPrefix(last, "SandboxWarmPool/default/agents-") || !strings.HasSuffix(last, " ready") {
		t.Fatalf("apply --wait printed %q last, want the warm pool's readiness", last)
	}
	f := strings.Fields(last)
	ready, replicas, ok := strings.Cut(f[1], "/")
	if len(f) != 3 || !ok || ready != replicas || ready == "0" {
		t.Fatalf("apply --wait printed %q: want n/n ready (n > 0)", last)
	}
}
