package validate

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
)

// releaseChain runs ../../testdata/release-chain.sh (the same release chain
// the act and gitlab-ci-local tests run against) with a registry of its own
// and returns what its chain.env names.
func releaseChain(t *testing.T, slipway, password string) map[string]string {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		missing(t, "bwrap is not installed: template build and the runtime run sandboxes with it (make deps)")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(slipway), "slipway-runner")); err != nil {
		missing(t, "no slipway-runner beside slipway: make build builds both (make test-tekton sets SLIPWAY_BIN)")
	}
	host := startRegistry(t)
	work := t.TempDir()
	cmd := exec.Command("bash", "../../testdata/release-chain.sh", slipway, host, work)
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+password)
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() { exec.Command("bash", "../../testdata/release-chain.sh", "--stop", work).Run() })
	if err != nil {
		t.Fatalf("release-chain.sh: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(work, "chain.env"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"REGISTRY": host}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		env[k] = v
	}
	return env
}

func configHead(t *testing.T, repo string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", repo, "rev-parse", "main").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestReleasePipelineRuns runs the slipway-template-release Pipeline as a
// PipelineRun would (RunPipeline: Tekton's pipelinerun and taskrun
// substitution, each Task's steps on the host) against the release chain:
// build (agent-tools pushed by digest, signed, attested), verify, generation
// (the template's REF pinned, the other pins from the previous generation)
// and promote, then the rollout Task with the Pipeline's GENERATION result
// on the running runtime. Then bad input: a runner by tag fails the
// generation task (exit 2, the CLI's message in its log) and a template
// signed by a key the policy does not name fails verify (exit 1,
// VERIFIED=false); nothing after them runs and nothing is promoted.
func TestReleasePipelineRuns(t *testing.T) {
	ctx, err := Context(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tasks, pipeline := loadAll(t)
	slipway := slipwayBin(t)
	const password = "tekton-chain-pw"
	c := releaseChain(t, slipway, password)

	signing, runtime := t.TempDir(), t.TempDir()
	key, err := os.ReadFile(c["KEY"])
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(signing, "cosign.key"), key, 0o600)
	token, err := os.ReadFile(c["TOKEN_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(runtime, "token"), token, 0o600)
	base := Host{
		Secrets: map[string]map[string]string{"slipway-signing": {"password": password}},
		Env:     []string{"PATH=" + filepath.Dir(slipway) + ":/usr/bin:/bin", "HOME=" + t.TempDir()},
	}
	str := func(v string) v1.ParamValue { return *v1.NewStructuredValues(v) }
	release := func(runner string) (*PipelineRunResult, error) {
		params := v1.Params{
			{Name: "spec", Value: str("templates/agent-tools/template.yaml")},
			{Name: "push", Value: str(c["REGISTRY"] + "/templates/agent-tools")},
			{Name: "policy", Value: str("policies/verification.yaml")},
			{Name: "pool", Value: str("agents")},
			{Name: "pins", Value: v1.ParamValue{Type: v1.ParamTypeArray, ArrayVal: []string{"runner=" + runner}}},
			{Name: "from", Value: str(c["G1_FILE"])},
			{Name: "repo", Value: str(c["CONFIG_REPO"])},
			{Name: "builder-id", Value: str("https://slipway.dev/builders/ci")},
		}
		return RunPipeline(ctx, pipeline, tasks, params, map[string]string{"source": c["PROJECT"], "signing": signing}, base)
	}

	before := configHead(t, c["CONFIG_REPO"])
	res, err := release(c["RUNNER"])
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Log)
	}
	digest := res.Results["IMAGE_DIGEST"]
	if res.Results["IMAGE_URL"] != c["REGISTRY"]+"/templates/agent-tools" || !strings.HasPrefix(digest, "sha256:") {
		t.Errorf("pipeline results %v", res.Results)
	}
	if v := res.Tasks["verify"]; v["VERIFIED"] != "true" || v["DIGEST"] != digest {
		t.Errorf("verify results %v", v)
	}
	gen := res.Results["GENERATION"]
	if !strings.HasPrefix(gen, "g-") || gen == c["G1"] || res.Tasks["generation"]["GENERATION"] != gen {
		t.Errorf("generation %q, generation task %v", gen, res.Tasks["generation"])
	}
	if head := configHead(t, c["CONFIG_REPO"]); res.Results["COMMIT"] != head {
		t.Errorf("COMMIT %q, config repository main %s", res.Results["COMMIT"], head)
	}
	if parent, err := exec.Command("git", "-C", c["CONFIG_REPO"], "rev-parse", res.Results["COMMIT"]+"^").Output(); err != nil || strings.TrimSpace(string(parent)) != before {
		t.Errorf("COMMIT's parent %q (%v), want %s", parent, err, before)
	}
	if t.Failed() {
		t.Fatalf("log:\n%s", res.Log)
	}

	// The rollout Task, with the Pipeline's GENERATION.
	spec, err := Substitute(ctx, tasks["slipway-rollout"], v1.Params{
		{Name: "repo", Value: str(c["CONFIG_REPO"])}, {Name: "pool", Value: str("agents")},
		{Name: "to", Value: str(gen)}, {Name: "server", Value: str(c["SERVER"])},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := base
	h.Results = t.TempDir()
	h.Workspaces = map[string]string{"signing": signing, "runtime": runtime}
	rolled, log, err := Run(ctx, spec, &h)
	if err != nil || rolled["STATUS"] != "succeeded" || rolled["GENERATION"] != gen || !strings.HasPrefix(rolled["ROLLOUT"], "ro-") {
		t.Fatalf("rollout: %v %v\n%s", err, rolled, log)
	}
	if strings.Contains(res.Log+log, password) {
		t.Error("the key's password is in a step's log")
	}

	// A runner image by tag where a digest is required.
	before = configHead(t, c["CONFIG_REPO"])
	tag := c["REGISTRY"] + "/platform/runner:v1"
	res, err = release(tag)
	var se *StepError
	if !errors.As(err, &se) || se.Code != 2 || res.Failed != "generation" || !strings.Contains(se.Output, tag+" is a tag, not a digest") {
		t.Fatalf("a runner by tag: %v (failed %q)\n%s", err, res.Failed, res.Log)
	}
	if res.Tasks["generation"]["GENERATION"] != "" || res.Tasks["promote"] != nil || configHead(t, c["CONFIG_REPO"]) != before {
		t.Fatalf("a refused generation went on: %v", res.Tasks)
	}

	// A changed template signed by a key the policy does not name.
	other := filepath.Join(t.TempDir(), "other")
	keygen := exec.Command(slipway, "keys", "generate", "--output-key-prefix", other)
	keygen.Env = append(os.Environ(), "COSIGN_PASSWORD="+password)
	if out, err := keygen.CombinedOutput(); err != nil {
		t.Fatalf("keys generate: %v\n%s", err, out)
	}
	otherKey, _ := os.ReadFile(other + ".key")
	os.WriteFile(filepath.Join(signing, "cosign.key"), otherKey, 0o600)
	os.WriteFile(filepath.Join(c["PROJECT"], "templates", "agent-tools", "cache-seed", "changed"), []byte("changed\n"), 0o644)
	res, err = release(c["RUNNER"])
	if !errors.As(err, &se) || se.Code != 1 || res.Failed != "verify" || res.Tasks["verify"]["VERIFIED"] != "false" || !strings.Contains(se.Output, "by key release") {
		t.Fatalf("a template signed by another key: %v (failed %q, verify %v)\n%s", err, res.Failed, res.Tasks["verify"], res.Log)
	}
	if res.Tasks["generation"] != nil || configHead(t, c["CONFIG_REPO"]) != before {
		t.Fatalf("a refused verification went on: %v", res.Tasks)
	}
}
