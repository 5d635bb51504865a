package pipelines

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/testharness/need"
)

// TestGitLabCILocalE2E runs examples/gitlab/local.gitlab-ci.yml with
// gitlab-ci-local on the host shell executor, in a git repository holding
// the component templates, a pinned tree and a policy: slipway-lint passes,
// slipway-verify verifies an image signed in an in-process registry, and
// the report job sees both jobs' dotenv outputs (FINDINGS, VERIFIED,
// DIGEST). Then the same pipeline with an unsigned image: verify fails
// with the CLI's message, still reports VERIFIED=false, and the report
// job does not run.
func TestGitLabCILocalE2E(t *testing.T) {
	need.Short(t, "gitlab-ci-local running the component's pipeline end to end")
	node, index := gitlabCILocal(t)
	slipway := need.Env(t, "SLIPWAY_BIN", "make test builds bin/slipway and sets it")
	need.Binary(t, "rsync", "gitlab-ci-local copies the checkout with it (make deps installs it)")
	if _, err := os.Stat(slipway); err != nil {
		t.Fatalf("SLIPWAY_BIN=%s: %v", slipway, err)
	}
	polyfill, err := filepath.Abs("gitlab/testdata/set-methods.mjs")
	if err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	push := func(repo string) string {
		img, err := random.Image(64, 1)
		if err != nil {
			t.Fatal(err)
		}
		tag, _ := name.NewTag(host + "/" + repo + ":v1")
		if err := remote.Write(tag, img); err != nil {
			t.Fatal(err)
		}
		d, _ := img.Digest()
		return host + "/" + repo + "@" + d.String()
	}
	signed, unsigned := push("runners/agent"), push("runners/other")

	// The project: templates, a pinned tree, the policy and its key.
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "pipelines", "gitlab", "templates"), os.DirFS("gitlab/templates")); err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile("../examples/gitlab/local.gitlab-ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		".gitlab-ci.yml":  string(ci),
		"deploy/web.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n    - name: web\n      image: " + signed + "\n",
		"policies/verification.yaml": `apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: runners}
spec:
  transparencyLog: none
  keys: [{name: ci, publicKeyFile: ci.pub}]
  rules:
    - name: runners
      match: {kinds: [runner]}
      signatures: {keys: [ci]}
`,
	}
	for f, body := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	keys := t.TempDir()
	env := append(os.Environ(), "COSIGN_PASSWORD=gitlab-e2e")
	sh := func(dir, bin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	sh(keys, slipway, "keys", "generate", "--output-key-prefix", "ci")
	sh(keys, slipway, "sign", signed, "--key", "ci.key", "--offline-no-tlog")
	pub, _ := os.ReadFile(filepath.Join(keys, "ci.pub"))
	os.WriteFile(filepath.Join(dir, "policies", "ci.pub"), pub, 0o644)
	sh(dir, "git", "init", "-q")
	sh(dir, "git", "add", "-A")
	sh(dir, "git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "project")

	// slipway on PATH, as in a job's image.
	bin := t.TempDir()
	if err := os.Symlink(slipway, filepath.Join(bin, "slipway")); err != nil {
		t.Fatal(err)
	}
	run := func(image string) (string, error) {
		cmd := exec.Command(node, "--import", polyfill, index,
			"--shell-executor-no-image", "--shell-isolation", "--color=false", "--variable", "IMAGE="+image)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	dotenv := func(job string) string {
		b, _ := os.ReadFile(filepath.Join(dir, ".gitlab-ci-local", "artifacts", job, ".gitlab-ci-reports", "dotenv", "slipway.env"))
		return string(b)
	}

	out, err := run(signed)
	if err != nil {
		t.Fatalf("gitlab-ci-local: %v\n%s", err, out)
	}
	digest := signed[strings.Index(signed, "@")+1:]
	for _, want := range []string{"PASS  slipway-lint", "PASS  slipway-verify", "PASS  report", "findings=0 verified=true digest=" + digest} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if got := dotenv("slipway-lint"); got != "FINDINGS=0\n" {
		t.Errorf("lint dotenv %q", got)
	}
	if got, want := dotenv("slipway-verify"), "VERIFIED=true\nREF="+signed+"\nDIGEST="+digest+"\n"; got != want {
		t.Errorf("verify dotenv %q, want %q", got, want)
	}
	// The Code Quality report is written in the job's directory (gitlab-ci-local
	// does not collect it): a clean tree's is [].
	if b, err := os.ReadFile(filepath.Join(dir, ".gitlab-ci-local", "builds", "slipway-lint", "gl-code-quality.json")); err != nil || strings.TrimSpace(string(b)) != "[]" {
		t.Errorf("lint's code quality report %q, %v", b, err)
	}
	if t.Failed() {
		t.Fatalf("output:\n%s", out)
	}

	out, err = run(unsigned)
	if err == nil || !strings.Contains(out, "FAIL  slipway-verify") || strings.Contains(out, "PASS  report") || strings.Contains(out, "findings=") {
		t.Fatalf("an unsigned image passed: %v\n%s", err, out)
	}
	if !strings.Contains(out, "FAIL runners/signature: no signature of "+unsigned) || !strings.Contains(out, "FAIL 1") {
		t.Errorf("the refusal's message or exit code 1 is not in the job's log:\n%s", out)
	}
	if got := dotenv("slipway-verify"); !strings.HasPrefix(got, "VERIFIED=false\n") {
		t.Errorf("refused verify dotenv %q", got)
	}
}

// TestGitLabCILocalRelease runs examples/gitlab/release.gitlab-ci.yml with
// gitlab-ci-local on the host shell executor against a releaseChain:
// template-build -> verify -> generation-create -> promote -> rollout, each
// job reading the one before's dotenv report (REF, FILE, GENERATION) and
// artifacts. Then a runner image by tag: generation-create fails with the
// CLI's message and exit 2, and promote and rollout never run.
func TestGitLabCILocalRelease(t *testing.T) {
	need.Short(t, "gitlab-ci-local running the release pipeline end to end")
	node, index := gitlabCILocal(t)
	need.Binary(t, "rsync", "gitlab-ci-local copies the checkout with it (make deps installs it)")
	polyfill, err := filepath.Abs("gitlab/testdata/set-methods.mjs")
	if err != nil {
		t.Fatal(err)
	}
	c := newReleaseChain(t, chainSkips(t))
	ci, err := os.ReadFile("../examples/gitlab/release.gitlab-ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	c.write(t, ".gitlab-ci.yml", string(ci))
	if err := os.CopyFS(filepath.Join(c.project, "pipelines", "gitlab", "templates"), os.DirFS("gitlab/templates")); err != nil {
		t.Fatal(err)
	}
	c.git(t, "add", "-A")
	c.git(t, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "pipeline")

	bin := t.TempDir()
	if err := os.Symlink(c.slipway, filepath.Join(bin, "slipway")); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	run := func(runner string) (string, error) {
		vars := map[string]string{
			"REGISTRY": c.host, "CONFIG_REPO": c.configRepo, "PREVIOUS": c.g1File, "RUNNER_IMAGE": runner,
			"RUNTIME_URL": c.server, "RUNTIME_TOKEN_FILE": c.tokenFile, "SLIPWAY_SIGN_KEY": c.keyFile, "COSIGN_PASSWORD": c.password,
		}
		args := []string{"--import", polyfill, index, "--shell-executor-no-image", "--shell-isolation", "--color=false"}
		for k, v := range vars {
			args = append(args, "--variable", k+"="+v)
		}
		cmd := exec.Command(node, args...)
		cmd.Dir = c.project
		cmd.Env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + home}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	dotenv := func(job string) map[string]string {
		b, _ := os.ReadFile(filepath.Join(c.project, ".gitlab-ci-local", "artifacts", job, ".gitlab-ci-reports", "dotenv", "slipway.env"))
		m := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				m[k] = v
			}
		}
		return m
	}

	before := c.head(t)
	out, err := run(c.runner)
	if err != nil {
		t.Fatalf("gitlab-ci-local: %v\n%s", err, out)
	}
	build, verify, gen, prom, roll := dotenv("slipway-template-build"), dotenv("slipway-verify"), dotenv("slipway-generation-create"), dotenv("slipway-promote"), dotenv("slipway-rollout")
	digest := build["DIGEST"]
	if !strings.HasPrefix(digest, "sha256:") || build["REF"] != c.host+"/templates/agent-tools@"+digest {
		t.Errorf("template-build dotenv %v", build)
	}
	if verify["VERIFIED"] != "true" || verify["DIGEST"] != digest {
		t.Errorf("verify dotenv %v", verify)
	}
	if !strings.HasPrefix(gen["GENERATION"], "g-") || gen["GENERATION"] == c.g1 || prom["GENERATION"] != gen["GENERATION"] || roll["GENERATION"] != gen["GENERATION"] {
		t.Errorf("generation %v, promote %v, rollout %v", gen, prom, roll)
	}
	if parent, err := exec.Command("git", "-C", c.configRepo, "rev-parse", prom["COMMIT"]+"^").Output(); err != nil || strings.TrimSpace(string(parent)) != before {
		t.Errorf("promote's COMMIT %q: parent %q (%v), want %s", prom["COMMIT"], parent, err, before)
	}
	if roll["STATUS"] != "succeeded" {
		t.Errorf("rollout dotenv %v", roll)
	}
	if want := "released digest=" + digest + " generation=" + gen["GENERATION"] + " rollout=succeeded"; !strings.Contains(out, want) {
		t.Errorf("the report job did not print %q", want)
	}
	if strings.Contains(out, c.password) {
		t.Error("the key's password is in the log")
	}
	if t.Failed() {
		t.Fatalf("output:\n%s", out)
	}

	// A runner image by tag where a digest is required.
	before = c.head(t)
	tag := c.host + "/platform/runner:v1"
	out, err = run(tag)
	if err == nil || !strings.Contains(out, "PASS  slipway-verify") || !strings.Contains(out, "FAIL  slipway-generation-create") ||
		strings.Contains(out, "PASS  slipway-promote") || strings.Contains(out, "PASS  slipway-rollout") {
		t.Fatalf("a runner by tag: %v\n%s", err, out)
	}
	if !strings.Contains(out, tag) || !strings.Contains(out, "FAIL 2") {
		t.Errorf("the CLI's message naming %s or exit code 2 is not in the job's log:\n%s", tag, out)
	}
	if c.head(t) != before {
		t.Error("the config repository changed after a refused generation")
	}
}
