package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/testharness/gittest"
)

// render through the CLI: a pool promoted twice renders at its head and at
// the first revision; a repository without a policy needs the visibly
// named --insecure-skip-verify.
func TestRender(t *testing.T) {
	_, host, digests := registryWith(t, "platform/cp:v1", "platform/runner:v1", "templates/tools:v1", "templates/tools:v2")
	dir := t.TempDir()
	img := func(rt string) string {
		repo, _, _ := strings.Cut(rt, ":")
		return host + "/" + repo + "@" + digests[rt]
	}
	repo := filepath.Join(dir, "config.git")
	if err := gitops.InitBare(repo, "main"); err != nil {
		t.Fatal(err)
	}
	for i, tmpl := range []string{"templates/tools:v1", "templates/tools:v2"} {
		gen := filepath.Join(dir, fmt.Sprintf("g%d.yaml", i))
		args := []string{"generation", "create", "--pool", "agents", "--insecure-skip-verify", "--output", gen,
			"--pin", "controlPlane=" + img("platform/cp:v1"), "--pin", "runner=" + img("platform/runner:v1"),
			"--pin", "workspaceTemplate=" + img(tmpl), "--control-plane-protocol", "1", "--runner-protocol", "1"}
		if i > 0 {
			args = append(args, "--from", filepath.Join(dir, "g0.yaml"))
		}
		if r := run(t, "", args...); r.code != 0 {
			t.Fatal(r)
		}
		args = []string{"promote", "--repo", repo, "--pool", "agents", "--generation", gen, "--insecure-skip-verify"}
		if i == 0 {
			args = append(args, "--activate")
		}
		if r := run(t, "", args...); r.code != 0 {
			t.Fatal(r)
		}
	}

	r := run(t, "", "render", "--repo", repo, "--pool", "agents")
	if r.code != 2 || !strings.Contains(r.stderr, "holds no policies/verification.yaml") {
		t.Fatalf("without a policy: %+v", r)
	}
	r = run(t, "", "render", "--repo", repo, "--pool", "agents", "--insecure-skip-verify")
	if r.code != 0 || strings.Count(r.stdout, "kind: SandboxTemplate") != 1 || strings.Count(r.stdout, "kind: SandboxWarmPool") != 1 {
		t.Fatalf("head: %+v", r)
	}
	head := gittest.Git(t, repo, "rev-parse", "main")
	if !strings.Contains(r.stdout, "slipway.dev/config-revision: "+head) {
		t.Fatalf("head render lacks revision %s:\n%s", head, r.stdout)
	}
	first := gittest.Git(t, repo, "rev-parse", "main~1")
	r = run(t, "", "render", "--repo", repo, "--pool", "agents", "--insecure-skip-verify", "--revision", first, "-o", "json")
	var res struct {
		Revision    string
		Generations []struct{ ID, State, WarmPool string }
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || res.Revision != first || len(res.Generations) != 1 {
		t.Fatalf("first revision: %+v %+v", r, res)
	}
	r = run(t, "", "render", "--repo", repo, "--pool", "agents", "--insecure-skip-verify", "--revision", strings.Repeat("ab", 20))
	if r.code != 2 || !strings.Contains(r.stderr, "is not on branch main") {
		t.Fatalf("unknown revision: %+v", r)
	}
}
