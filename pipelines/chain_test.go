package pipelines

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/testharness/registrytest"

	"github.com/slipway-dev/slipway/testharness/need"
)

// releaseChain is what a CI system's release steps run against on this
// machine: Debian's docker-registry and what testdata/release-chain.sh
// makes with the slipway CLI (a project holding the agent-tools template
// and a policy, a signing key outside it, a config repository whose pool
// agents has a first generation active, and `slipway runtime serve`
// following it with warm sandboxes). The CI steps then build, verify, pin,
// promote and roll out agent-tools as the pool's next generation. The
// Tekton harness (tekton/validate) runs the same script.
type releaseChain struct {
	slipway string
	host    string // the registry, host:port
	project string // the checkout the CI steps work in
	keyFile string // cosign key (outside the project)
	// password of keyFile; passed to the steps as a secret, never inherited.
	password   string
	configRepo string
	g1File, g1 string // the active generation
	runner     string // the signed runner image, by digest
	server     string // the runtime's API
	tokenFile  string
}

func chainSkips(t *testing.T) string {
	t.Helper()
	slipway := need.Env(t, "SLIPWAY_BIN", "make test builds bin/slipway and sets it")
	if _, err := os.Stat(slipway); err != nil {
		t.Fatalf("SLIPWAY_BIN=%s: %v", slipway, err)
	}
	need.Binary(t, "bwrap", "template build and the runtime run sandboxes with it (make deps installs bubblewrap)")
	if _, err := os.Stat(filepath.Join(filepath.Dir(slipway), "slipway-runner")); err != nil {
		need.Missing(t, "no slipway-runner beside SLIPWAY_BIN: make build builds both")
	}
	return slipway
}

func newReleaseChain(t *testing.T, slipway string) *releaseChain {
	t.Helper()
	registrytest.NeedDistribution(t)
	reg, err := registrytest.StartDistribution(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	c := &releaseChain{slipway: slipway, host: reg.Addr(), password: "chain-pw-7f3e"}
	work := t.TempDir()
	cmd := exec.Command("bash", "testdata/release-chain.sh", slipway, c.host, work)
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+c.password)
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() { exec.Command("bash", "testdata/release-chain.sh", "--stop", work).Run() })
	if err != nil {
		t.Fatalf("release-chain.sh: %v\n%s", err, out)
	}
	env, err := os.ReadFile(filepath.Join(work, "chain.env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(env)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		for key, p := range map[string]*string{"PROJECT": &c.project, "KEY": &c.keyFile, "CONFIG_REPO": &c.configRepo,
			"G1_FILE": &c.g1File, "G1": &c.g1, "RUNNER": &c.runner, "SERVER": &c.server, "TOKEN_FILE": &c.tokenFile} {
			if k == key {
				*p = v
			}
		}
	}
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
