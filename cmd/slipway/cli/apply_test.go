package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/testharness/kubetest"
)

// apply through the CLI against a real API server: created, then
// unchanged; --wait fails at its timeout naming the warm pool (no kubelet
// runs here); a missing kubeconfig is a usage error.
func TestApply(t *testing.T) {
	c := kubetest.New(t)
	_, host, digests := registryWith(t, "platform/cp:v1", "platform/runner:v1", "templates/tools:v1")
	dir := t.TempDir()
	img := func(rt string) string {
		repo, _, _ := strings.Cut(rt, ":")
		return host + "/" + repo + "@" + digests[rt]
	}
	repo := filepath.Join(dir, "config.git")
	if err := gitops.InitBare(repo, "main"); err != nil {
		t.Fatal(err)
	}
	gen := filepath.Join(dir, "g0.yaml")
	if r := run(t, "", "generation", "create", "--pool", "agents", "--insecure-skip-verify", "--output", gen,
		"--pin", "controlPlane="+img("platform/cp:v1"), "--pin", "runner="+img("platform/runner:v1"),
		"--pin", "workspaceTemplate="+img("templates/tools:v1"), "--control-plane-protocol", "1", "--runner-protocol", "1"); r.code != 0 {
		t.Fatal(r)
	}
	if r := run(t, "", "promote", "--repo", repo, "--pool", "agents", "--generation", gen, "--insecure-skip-verify", "--activate"); r.code != 0 {
		t.Fatal(r)
	}

	args := []string{"apply", "--repo", repo, "--pool", "agents", "--insecure-skip-verify", "--kubeconfig", c.Kubeconfig()}
	r := run(t, "", args...)
	if r.code != 0 || strings.Count(r.stdout, " Created\n") != 2 || !strings.Contains(r.stdout, "SandboxWarmPool/default/agents-") {
		t.Fatalf("first apply: %+v", r)
	}
	r = run(t, "", append(args, "-o", "json")...)
	var out struct {
		Inventory string
		Changes   []struct{ Action string }
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || out.Inventory != "default/slipway-inventory-agents" ||
		len(out.Changes) != 2 || out.Changes[0].Action != "Unchanged" || out.Changes[1].Action != "Unchanged" {
		t.Fatalf("second apply: %+v", r)
	}
	r = run(t, "", append(args, "--wait", "--timeout", "1s")...)
	if r.code != 1 || !strings.Contains(r.stderr, "warm pools not ready within 1s: SandboxWarmPool/default/agents-") {
		t.Fatalf("--wait without a kubelet: %+v", r)
	}
	r = run(t, "", "apply", "--repo", repo, "--pool", "agents", "--insecure-skip-verify", "--kubeconfig", filepath.Join(dir, "none"))
	if r.code != 2 || !strings.Contains(r.stderr, "kubeconfig") {
		t.Fatalf("missing kubeconfig: %+v", r)
	}
}
