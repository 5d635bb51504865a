//go:build linux

package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/pkg/release/template"
	"github.com/slipway-dev/slipway/testharness/gittest"
	"github.com/slipway-dev/slipway/testharness/incluster"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// A job through Slipway's planes in the cluster: overlays/single installed
// from a snapshot release (as TestInClusterSingle does), a config
// repository with tenant acme, profile standard, prices and pool agents,
// whose active generation pins the release's control plane and runner and
// a signed template; the pool's objects applied (slipway apply, the
// release's own CLI) in slipway-sandboxes, where agent-sandbox's
// controller keeps its warm members. A job submitted to the control
// plane's Service with acme's token is dispatched to the runtime's
// Service, runs in a warm member's pod (not as root) and succeeds; its run
// manifest, read from the runtime's Service, is the job's, in that pod on
// the node, and names the images that served it by the
// digests the release pushed and the binaries they measured by the sums
// in the release's checksums.txt.
//
// The Services are reached at their cluster IPs, from the host, through
// kube-proxy's rules: the API server's service proxy would do for /readyz,
// but it takes the Authorization header for itself (it authenticates the
// caller, then deletes the header), so a tenant's token never reaches the
// control plane through it.
func JobPlanes(t testing.TB, overlay string, replicas int64) (*Env, *controlapi.Client, *runtimeapi.Client, string) {
	t.Helper()
	e := Start(t, true)
	control, rt, gen := e.JobPlanes(t, overlay, replicas)
	return e, control, rt, gen
}

// JobPlanes is JobPlanes on e as it stands: e's release, its images and
// its deploy folder.
func (e *Env) JobPlanes(t testing.TB, overlay string, replicas int64) (*controlapi.Client, *runtimeapi.Client, string) {
	t.Helper()
	repo, gen := SeedJobConfig(t, e)
	e.InstallPlanes(t, overlay, replicas, e.JobSettings())
	e.Slipway(t, "apply", "--repo", repo, "--pool", "agents", "--kubeconfig", e.C.Kubeconfig(), "--wait", "--timeout", "3m")
	e.Mark("pool agents warm")
	token := strings.TrimSpace(e.Slipway(t, "tenant", "token", "create", "acme", "--db", e.PG.DSN("slipway")))
	control, err := controlapi.NewClient(e.ServiceURL(t, "slipway-control"), token)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtimeapi.NewClient(e.ServiceURL(t, "slipway-runtime"), RuntimeToken)
	if err != nil {
		t.Fatal(err)
	}
	return control, rt, gen
}

// JobSettings are the settings ConfigMap's data of jobPlanes' install:
// config repository config.git's main branch, pool agents.
func (e *Env) JobSettings() map[string]string {
	return map[string]string{"repo": e.Git.URLAlso("config.git"), "branch": "main", "pool": "agents"}
}

// CheckServedBy holds m's served_by to the release: the control plane and
// the runtime each name the release's slipway image by its pushed digest
// and measured the release's slipway binary; the runner's image is the
// release's slipway-runner and the runner binary the runtime measured in
// the sandbox is the release's.
func CheckServedBy(t testing.TB, e *Env, m *runmanifest.Manifest) {
	t.Helper()
	CheckPlanes(t, "", e.Rel, e.Images, m, true)
	CheckRunner(t, "", e.Rel, e.Images, m)
	if mm := m.Mismatches(); len(mm) > 0 {
		t.Errorf("served_by differs from the generation's pins: %v", mm)
	}
}

// CheckPlanes holds run manifest m's served_by to the release in rel,
// whose images are images: the control plane and the runtime measured its
// slipway binary and, when named, name its slipway image by digest
// (withImage: they must). what starts each error (a job's name, or "").
func CheckPlanes(t testing.TB, what, rel string, images map[string]string, m *runmanifest.Manifest, withImage bool) {
	t.Helper()
	slipwayBin := "sha256:" + ReleaseSums(t, rel)["slipway-linux-"+goruntime.GOARCH]
	want := DigestPart(images["slipway"])
	for _, p := range []struct {
		what string
		got  *runmanifest.Process
	}{{"control_plane", m.ServedBy.ControlPlane}, {"runtime", m.ServedBy.Runtime}} {
		switch {
		case p.got == nil:
			t.Errorf("%srun %s: served_by.%s: none", what, m.RunID, p.what)
		case p.got.BinarySHA256 != slipwayBin:
			t.Errorf("%srun %s: served_by.%s.binary_sha256 = %q, the release's slipway (%s) is %s", what, m.RunID, p.what, p.got.BinarySHA256, rel, slipwayBin)
		case p.got.Image == "" && withImage, p.got.Image != "" && DigestPart(p.got.Image) != want:
			t.Errorf("%srun %s: served_by.%s.image = %q, the release pushed slipway as %s", what, m.RunID, p.what, p.got.Image, images["slipway"])
		}
	}
}

// CheckRunner holds run manifest m's runner to the release in rel, whose
// images are images: the runner's image is its slipway-runner (the
// generation's pin) and the runner binary the runtime measured in the
// sandbox is its. what starts each error.
func CheckRunner(t testing.TB, what, rel string, images map[string]string, m *runmanifest.Manifest) {
	t.Helper()
	if got, w := m.RunnerImageDigest, DigestPart(images["slipway-runner"]); got != w {
		t.Errorf("%srun %s on %s: runner_image_digest = %q, the release pushed slipway-runner as %s", what, m.RunID, m.Generation, got, images["slipway-runner"])
	}
	runnerBin := "sha256:" + ReleaseSums(t, rel)["slipway-runner-linux-"+goruntime.GOARCH]
	if r := m.ServedBy.Runner; r == nil || r.BinarySHA256 != runnerBin {
		t.Errorf("%srun %s on %s: served_by.runner = %+v, the release's slipway-runner binary is %s", what, m.RunID, m.Generation, r, runnerBin)
	}
}

// DigestPart is the digest of reference ref (after its @).
func DigestPart(ref string) string {
	_, d, _ := strings.Cut(ref, "@")
	return d
}

// SeedJobConfig makes config repository config.git on the git server: pool
// agents (its objects in slipway-sandboxes) whose active generation pins
// the release's slipway image as control plane, its slipway-runner and a
// template signed with the release's key; the verification policy is the
// release's with a rule for templates; tenant acme, profile standard and
// prices beside them. It returns the repository's folder and the
// generation's id.
func SeedJobConfig(t testing.TB, e *Env) (string, string) {
	t.Helper()
	work := t.TempDir()
	tmpl := SignedTemplate(t, e)
	pol := string(e.Policy) + fmt.Sprintf(`    - name: templates
      match:
        repositories:
          - %s/templates/*
      signatures:
        keys: [slipway-release]
`, e.Host)
	polFile := filepath.Join(work, "verification.yaml")
	if err := os.WriteFile(polFile, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	repo := e.Git.Dir("config.git")
	e.Slipway(t, "config", "init", repo, "--pool", "agents", "--policy", polFile)
	clone := filepath.Join(work, "clone")
	gittest.Git(t, work, "clone", "-q", repo, clone)
	files := map[string]string{
		// the sandboxes' namespace, the runtime's --namespace
		"pools/agents/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: slipway-sandboxes\nimages: []\n",
		"tenants/acme.yaml": `apiVersion: slipway.dev/v1alpha1
kind: Tenant
name: acme
pools: [agents]
profiles: [standard]
concurrency: 4
queueBound: 60
budget:
  amount: 100
  period: day
`,
		"profiles/standard.yaml": `apiVersion: slipway.dev/v1alpha1
kind: Profile
name: standard
network:
  mode: deny
maxDuration: 2m
maxCommandDuration: 1m
output:
  maxBytes: 65536
  maxLines: 2000
secrets: []
`,
		"pricing.yaml": `apiVersion: slipway.dev/v1alpha1
kind: Pricing
currency: credits
classes:
  standard:
    warm: 0.1
    active: 1.0
    storage: 0.01
pools:
  agents: standard
`,
	}
	for rel, body := range files {
		p := filepath.Join(clone, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gittest.Git(t, clone, "add", "-A")
	gittest.Git(t, clone, "commit", "-q", "-m", "tenant acme, profile standard, prices; pool agents in slipway-sandboxes")
	gittest.Git(t, clone, "push", "-q", "origin", "HEAD:main")
	gen := filepath.Join(work, "g1.yaml")
	id := strings.TrimSpace(e.Slipway(t, "generation", "create", "--pool", "agents", "--policy", polFile, "--out-file", gen,
		"--pin", "controlPlane="+e.Images["slipway"], "--pin", "runner="+e.Images["slipway-runner"],
		"--pin", "workspaceTemplate="+tmpl, "--control-plane-protocol", "1-2", "--runner-protocol", "1"))
	if e.WarmSize > 0 {
		e.Slipway(t, "pool", "set", "--repo", repo, "--pool", "agents", fmt.Sprintf("warmSize=%d", e.WarmSize))
	}
	e.Slipway(t, "promote", "--repo", repo, "--pool", "agents", "--generation", gen, "--activate")
	return repo, id
}

// SignedTemplate pushes a busybox template (its own command blocks, as a
// pod's must; labelled as template build labels one) to the registry and
// signs it with the release's key.
func SignedTemplate(t testing.TB, e *Env) string {
	t.Helper()
	ctx := context.Background()
	base := filepath.Join(t.TempDir(), "rootfs")
	if out, err := exec.Command("bash", filepath.Join(Root(t), "fixtures", "base", "busybox-rootfs.sh"), base).CombinedOutput(); err != nil {
		t.Fatalf("busybox-rootfs.sh: %v\n%s", err, out)
	}
	img, done, err := template.ImageFromDir(ctx, base, time.Unix(0, 0), v1.Platform{OS: "linux", Architecture: goruntime.GOARCH}, []string{"PATH=/bin:/usr/bin"})
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	c.WorkingDir = "/workspace"
	c.Entrypoint = []string{"/bin/sleep", "86400"}
	spec := sha256.Sum256([]byte("busybox: fixtures/base/busybox-rootfs.sh, sleep 86400"))
	c.Labels = map[string]string{templatemeta.LabelName: "busybox", templatemeta.LabelSpecDigest: "sha256:" + hex.EncodeToString(spec[:])}
	if img, err = mutate.Config(img, c); err != nil {
		t.Fatal(err)
	}
	ref := registrytest.Push(t, e.Host+"/templates/busybox:v1", img)
	if _, err := sign.Sign(ctx, ref, e.Signer, sign.WithOfflineNoTlog()); err != nil {
		t.Fatalf("sign %s: %v", ref, err)
	}
	return ref.String()
}

// Slipway runs the release's own CLI (for this machine's platform) in a
// folder of its own and returns its standard output.
func (e *Env) Slipway(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(e.Rel, "slipway-linux-"+goruntime.GOARCH), args...)
	cmd.Dir = t.TempDir()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("slipway %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// ServiceURL is http://<cluster IP>:<port> of Service svc in
// slipway-system, its port named http, once the host reaches it
// (incluster.ServiceURL).
func (e *Env) ServiceURL(t testing.TB, svc string) string {
	t.Helper()
	u, err := incluster.ServiceURL(context.Background(), e.CS, svc)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// AfterOwnerDeadline follows unknown job j until it leaves unknown, or
// until a minute past its owner's deadline when that is within 2 minutes,
// logs what it became and returns it: still unknown is what the control plane shows
// when nobody confirmed the outcome, owner and deadline in view.
func AfterOwnerDeadline(t testing.TB, ctx context.Context, control *controlapi.Client, j *controlapi.Job) *controlapi.Job {
	t.Helper()
	first := *j
	until := j.OwnerDeadline.Add(time.Minute)
	if until.After(time.Now().Add(3 * time.Minute)) { // an owner that has hours (an operator): shown, not awaited
		until = time.Now()
	}
	for j.State == controlapi.Unknown && time.Now().Before(until) {
		time.Sleep(time.Second)
		if n, err := control.Get(ctx, j.ID); err == nil {
			j = n
		}
	}
	t.Logf("job %s was unknown (%s: %s), owner %s, deadline %s; now (%s) it is %s (%s), attempt %d, run %s",
		j.ID, first.Reason, first.Detail, first.Owner, first.OwnerDeadline.Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339),
		j.State, j.Reason, j.Attempt, j.RunID)
	return j
}
