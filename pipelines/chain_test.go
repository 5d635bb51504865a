package pipelines

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/registrytest"
)

// releaseChain is what a CI system's release steps run against on this
// machine, made with the slipway CLI as an operator would: Debian's
// docker-registry; a project (a git repository) holding the agent-tools
// template (its base pinned by digest) and a verification policy; a
// signing key outside it; a config repository whose pool agents has a
// first generation active (the minimal template, a signed runner and
// control plane); and `slipway runtime serve` following that repository
// with warm sandboxes, as the demo runs it. The CI steps then build, verify,
// pin, promote and roll out agent-tools as the pool's next generation.
type releaseChain struct {
	slipway string
	host    string // the registry, host:port
	project string // the checkout the CI steps work in
	keyFile string // cosign key (outside the project)
	pubFile string
	// password of keyFile; passed to the steps as a secret, never inherited.
	password   string
	configRepo string
	g1File, g1 string // the active generation
	runner     string // the signed runner image, by digest
	server     string // the runtime's API
	tokenFile  string
}

// builderID is the provenance builder the policy accepts (the CI step sets it).
const builderID = "https://slipway.dev/builders/ci"

func chainSkips(t *testing.T) string {
	t.Helper()
	slipway := os.Getenv("SLIPWAY_BIN")
	if slipway == "" {
		t.Skip("SLIPWAY_BIN is not set: make test builds bin/slipway and sets it")
	}
	if _, err := os.Stat(slipway); err != nil {
		t.Fatalf("SLIPWAY_BIN=%s: %v", slipway, err)
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap is not installed: template build and the runtime run sandboxes with it (make deps installs it)")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(slipway), "slipway-runner")); err != nil {
		t.Skip("no slipway-runner beside SLIPWAY_BIN: make build builds both")
	}
	return slipway
}

func newReleaseChain(t *testing.T, slipway string) *releaseChain {
	t.Helper()
	reg, err := registrytest.StartDistribution(t.Context(), t.TempDir())
	if errors.Is(err, registrytest.ErrNotInstalled) {
		t.Skip("docker-registry is not installed (make deps installs it)")
	} else if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	// Templates run as uid 1000: the runtime's state must be reachable by it.
	work := t.TempDir()
	for d := work; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	c := &releaseChain{
		slipway: slipway, host: reg.Addr(), project: filepath.Join(work, "project"),
		keyFile: filepath.Join(work, "keys", "release.key"), pubFile: filepath.Join(work, "keys", "release.pub"),
		password: "chain-pw-7f3e", configRepo: filepath.Join(work, "config.git"),
		g1File: filepath.Join(work, "g1.yaml"), tokenFile: filepath.Join(work, "runtime.token"),
	}
	run := func(args ...string) string { return c.run(t, work, args...) }

	base := filepath.Join(work, "base-rootfs")
	if out, err := exec.Command("bash", "../fixtures/base/busybox-rootfs.sh", base).CombinedOutput(); err != nil {
		t.Fatalf("busybox-rootfs.sh: %v\n%s", err, out)
	}
	baseRef := strings.TrimSpace(run("image", "from-dir", base, "--push", c.host+"/slipway/base:busybox"))
	if err := os.CopyFS(filepath.Join(c.project, "templates"), os.DirFS("../templates")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"minimal", "agent-tools"} {
		spec := filepath.Join(c.project, "templates", name, "template.yaml")
		b, err := os.ReadFile(spec)
		if err != nil {
			t.Fatal(err)
		}
		b = regexp.MustCompile(`(?m)^  base: .*$`).ReplaceAll(b, []byte("  base: "+baseRef))
		if err := os.WriteFile(spec, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Dir(c.keyFile), 0o700)
	run("keys", "generate", "--output-key-prefix", strings.TrimSuffix(c.keyFile, ".key"))
	pub, err := os.ReadFile(c.pubFile)
	if err != nil {
		t.Fatal(err)
	}
	c.write(t, "policies/release.pub", string(pub))
	c.write(t, "policies/verification.yaml", `apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: chain}
spec:
  transparencyLog: none
  keys: [{name: release, publicKeyFile: release.pub}]
  rules:
    - name: templates
      match: {kinds: [workspace-template]}
      signatures: {keys: [release]}
      attestations:
        - {type: slsaprovenance, builderID: "`+builderID+`", buildType: "https://slipway.dev/template-build/v1"}
        - {type: sbom}
    - name: platform
      match: {kinds: [control-plane, runner]}
      signatures: {keys: [release]}
`)
	policy := filepath.Join(c.project, "policies", "verification.yaml")

	// The pool's first generation, made and activated outside CI.
	minimal := jsonField(t, run("template", "build", filepath.Join(c.project, "templates", "minimal", "template.yaml"),
		"--push", c.host+"/templates/minimal", "--sign-key", c.keyFile, "--offline-no-tlog", "--builder-id", builderID), "ref")
	run("image", "runner", filepath.Join(filepath.Dir(slipway), "slipway-runner"), "--push", c.host+"/platform/runner:v1")
	cp := filepath.Join(work, "control-plane")
	os.MkdirAll(cp, 0o755)
	os.WriteFile(filepath.Join(cp, "control-plane"), []byte("control plane v1\n"), 0o644)
	run("image", "from-dir", cp, "--push", c.host+"/platform/control-plane:v1")
	c.runner = strings.TrimSpace(run("resolve", c.host+"/platform/runner:v1"))
	controlPlane := strings.TrimSpace(run("resolve", c.host+"/platform/control-plane:v1"))
	for _, ref := range []string{c.runner, controlPlane} {
		run("sign", ref, "--key", c.keyFile, "--offline-no-tlog")
	}
	run("config", "init", c.configRepo, "--pool", "agents", "--policy", policy)
	c.g1 = strings.TrimSpace(run("generation", "create", "--pool", "agents", "--policy", policy, "--output", c.g1File,
		"--pin", "controlPlane="+controlPlane, "--pin", "runner="+c.runner, "--pin", "workspaceTemplate="+minimal,
		"--pin", "secretVersion=vault://kv/agents/api-token#1", "--control-plane-protocol", "1-2", "--runner-protocol", "1"))
	run("promote", "--repo", c.configRepo, "--pool", "agents", "--generation", c.g1File, "--activate")

	c.git(t, "init", "-q")
	c.git(t, "add", "-A")
	c.git(t, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "project")
	c.startRuntime(t, work)
	return c
}

// run runs slipway in dir with the key's password and returns its stdout.
func (c *releaseChain) run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(c.slipway, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+c.password)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("slipway %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

func (c *releaseChain) write(t *testing.T, rel, body string) {
	t.Helper()
	f := filepath.Join(c.project, rel)
	os.MkdirAll(filepath.Dir(f), 0o755)
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (c *releaseChain) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = c.project
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// head is the config repository's main commit.
func (c *releaseChain) head(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", c.configRepo, "rev-parse", "main").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// startRuntime starts `slipway runtime serve` on the config repository and
// waits for its API and its first warm sandboxes.
func (c *releaseChain) startRuntime(t *testing.T, work string) {
	t.Helper()
	if err := os.WriteFile(c.tokenFile, []byte("chain-runtime-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(c.slipway, "runtime", "serve", "--config-repo", c.configRepo, "--state", filepath.Join(work, "state"),
		"--listen", "127.0.0.1:0", "--token-file", c.tokenFile, "--sync-interval", "500ms")
	stderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { srv.Wait(); close(exited) }()
	t.Cleanup(func() {
		srv.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			srv.Process.Kill()
			<-exited
		}
	})
	addr, warm := make(chan string, 1), make(chan struct{}, 1)
	var log strings.Builder
	logged := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			select {
			case logged <- line:
			default:
			}
			if a, ok := strings.CutPrefix(line, "serving on "); ok {
				addr <- a
			}
			if strings.HasPrefix(line, "warm pools: ") {
				select {
				case warm <- struct{}{}:
				default:
				}
			}
		}
	}()
	drain := func() string {
		for {
			select {
			case l := <-logged:
				log.WriteString(l + "\n")
			default:
				return log.String()
			}
		}
	}
	timeout := time.After(90 * time.Second)
	for got := 0; got < 2; {
		select {
		case a := <-addr:
			c.server = "http://" + a
			got++
		case <-warm:
			got++
		case <-exited:
			t.Fatalf("runtime serve exited:\n%s", drain())
		case <-timeout:
			t.Fatalf("runtime serve: no API or no warm sandbox within 90s:\n%s", drain())
		}
	}
}

// jsonField is a top-level string field of slipway's JSON output.
func jsonField(t *testing.T, out, field string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%v in:\n%s", err, out)
	}
	v, ok := m[field].(string)
	if !ok || v == "" {
		t.Fatalf("no %s in:\n%s", field, out)
	}
	return v
}
