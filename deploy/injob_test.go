//go:build linux

package deploy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/pkg/release/template"
	"github.com/slipway-dev/slipway/testharness/gittest"
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
func TestInClusterJob(t *testing.T) {
	e, control, rt, _ := jobPlanes(t, "single", 1)
	ctx := context.Background()
	job, _, err := control.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard",
		Commands: [][]string{{"sh", "-c", "echo hello from $(hostname) as $(id -u)"}}})
	if err != nil {
		t.Fatalf("POST /v1/jobs to Service slipway-control: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var story []string
	final, err := control.Wait(wctx, job.ID, 300*time.Millisecond, func(j *controlapi.Job) { story = append(story, string(j.State)) })
	if err != nil {
		t.Fatalf("job %s: %v (states %v)\n%s\n%s", job.ID, err, story, podsState(t, e.c, "slipway-control"), podsState(t, e.c, "slipway-runtime"))
	}
	if final.State != controlapi.Succeeded || final.RunID == "" || !strings.Contains(final.Output, "hello from ") {
		t.Fatalf("job %s ended %s (%s: %s), run %q, output %q (states %v)\n%s\n%s", job.ID, final.State, final.Reason, final.Detail,
			final.RunID, final.Output, story, podsState(t, e.c, "slipway-control"), podsState(t, e.c, "slipway-runtime"))
	}
	e.mark("job " + job.ID + " succeeded")
	// The pod it ran in is one of the pool's, in slipway-sandboxes.
	said := helloFrom.FindStringSubmatch(final.Output)
	if said == nil {
		t.Fatalf("job %s's output says no pod: %q", job.ID, final.Output)
	}
	pod := said[1]
	if said[2] == "0" {
		t.Errorf("the job ran as root in pod %s", pod)
	}

	m, err := rt.Run(ctx, final.RunID)
	if err != nil {
		t.Fatalf("GET /v1/runs/%s from Service slipway-runtime: %v", final.RunID, err)
	}
	// The run is the job's, in the pod it said, a sandbox of the pool's
	// namespace on the node.
	if m.SessionID != job.ID || m.Namespace != "slipway-sandboxes" || m.NodeID != e.node || !strings.Contains(m.SandboxID, pod) {
		t.Errorf("run %s: session %q, namespace %q, node %q, sandbox %q; want job %s's, in slipway-sandboxes on %s, in pod %s",
			m.RunID, m.SessionID, m.Namespace, m.NodeID, m.SandboxID, job.ID, e.node, pod)
	}
	checkServedBy(t, e, m)
	t.Logf("run %s in pod %s, served by control plane %s, runtime %s, runner %s; %s", m.RunID, pod,
		m.ServedBy.ControlPlane.Image, m.ServedBy.Runtime.Image, m.RunnerImageDigest, strings.Join(e.timings, ", "))
}

// jobPlanes is the config repository (seedJobConfig), the planes of
// overlay installed with replicas each, pool agents applied and warm, and
// clients of the control plane's Service (as tenant acme) and of the
// runtime's; it returns them and the active generation.
func jobPlanes(t testing.TB, overlay string, replicas int64) (*inCluster, *controlapi.Client, *runtimeapi.Client, string) {
	t.Helper()
	e := startInCluster(t, true)
	control, rt, gen := e.jobPlanes(t, overlay, replicas)
	return e, control, rt, gen
}

// jobPlanes is jobPlanes on e as it stands: e's release, its images and
// its deploy folder.
func (e *inCluster) jobPlanes(t testing.TB, overlay string, replicas int64) (*controlapi.Client, *runtimeapi.Client, string) {
	t.Helper()
	repo, gen := seedJobConfig(t, e)
	e.installPlanes(t, overlay, replicas, e.jobSettings())
	e.slipway(t, "apply", "--repo", repo, "--pool", "agents", "--kubeconfig", e.c.Kubeconfig(), "--wait", "--timeout", "3m")
	e.mark("pool agents warm")
	token := strings.TrimSpace(e.slipway(t, "tenant", "token", "create", "acme", "--db", e.pg.DSN("slipway")))
	control, err := controlapi.NewClient(e.serviceURL(t, "slipway-control"), token)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtimeapi.NewClient(e.serviceURL(t, "slipway-runtime"), runtimeToken)
	if err != nil {
		t.Fatal(err)
	}
	return control, rt, gen
}

// jobSettings are the settings ConfigMap's data of jobPlanes' install:
// config repository config.git's main branch, pool agents.
func (e *inCluster) jobSettings() map[string]string {
	return map[string]string{"repo": e.git.URLAlso("config.git"), "branch": "main", "pool": "agents"}
}

// checkServedBy holds m's served_by to the release: the control plane and
// the runtime each name the release's slipway image by its pushed digest
// and measured the release's slipway binary; the runner's image is the
// release's slipway-runner and the runner binary the runtime measured in
// the sandbox is the release's.
func checkServedBy(t testing.TB, e *inCluster, m *runmanifest.Manifest) {
	t.Helper()
	sums := releaseSums(t, e.rel)
	slipwayBin := "sha256:" + sums["slipway-linux-"+goruntime.GOARCH]
	runnerBin := "sha256:" + sums["slipway-runner-linux-"+goruntime.GOARCH]
	want := digestPart(e.images["slipway"])
	for _, p := range []struct {
		what string
		got  *runmanifest.Process
	}{{"control_plane", m.ServedBy.ControlPlane}, {"runtime", m.ServedBy.Runtime}} {
		switch {
		case p.got == nil:
			t.Errorf("served_by.%s: none", p.what)
		case digestPart(p.got.Image) != want:
			t.Errorf("served_by.%s.image = %q, the release pushed slipway as %s", p.what, p.got.Image, e.images["slipway"])
		case p.got.BinarySHA256 != slipwayBin:
			t.Errorf("served_by.%s.binary_sha256 = %q, the release's slipway is %s", p.what, p.got.BinarySHA256, slipwayBin)
		}
	}
	if got, w := m.RunnerImageDigest, digestPart(e.images["slipway-runner"]); got != w {
		t.Errorf("runner_image_digest = %q, the release pushed slipway-runner as %s", got, e.images["slipway-runner"])
	}
	switch r := m.ServedBy.Runner; {
	case r == nil:
		t.Errorf("served_by.runner: none")
	case r.BinarySHA256 != runnerBin:
		t.Errorf("served_by.runner.binary_sha256 = %q, the release's slipway-runner is %s", r.BinarySHA256, runnerBin)
	}
	if mm := m.Mismatches(); len(mm) > 0 {
		t.Errorf("served_by differs from the generation's pins: %v", mm)
	}
}

// helloFrom is the job's line: the pod's name and the user it ran as.
var helloFrom = regexp.MustCompile(`hello from (\S+) as (\d+)`)

func digestPart(ref string) string {
	_, d, _ := strings.Cut(ref, "@")
	return d
}

// seedJobConfig makes config repository config.git on the git server: pool
// agents (its objects in slipway-sandboxes) whose active generation pins
// the release's slipway image as control plane, its slipway-runner and a
// template signed with the release's key; the verification policy is the
// release's with a rule for templates; tenant acme, profile standard and
// prices beside them. It returns the repository's folder and the
// generation's id.
func seedJobConfig(t testing.TB, e *inCluster) (string, string) {
	t.Helper()
	work := t.TempDir()
	tmpl := signedTemplate(t, e)
	pol := string(e.policy) + fmt.Sprintf(`    - name: templates
      match:
        repositories:
          - %s/templates/*
      signatures:
        keys: [slipway-release]
`, e.host)
	polFile := filepath.Join(work, "verification.yaml")
	if err := os.WriteFile(polFile, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	repo := e.git.Dir("config.git")
	e.slipway(t, "config", "init", repo, "--pool", "agents", "--policy", polFile)
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
	id := strings.TrimSpace(e.slipway(t, "generation", "create", "--pool", "agents", "--policy", polFile, "--out-file", gen,
		"--pin", "controlPlane="+e.images["slipway"], "--pin", "runner="+e.images["slipway-runner"],
		"--pin", "workspaceTemplate="+tmpl, "--control-plane-protocol", "1-2", "--runner-protocol", "1"))
	e.slipway(t, "promote", "--repo", repo, "--pool", "agents", "--generation", gen, "--activate")
	return repo, id
}

// signedTemplate pushes a busybox template (its own command blocks, as a
// pod's must; labelled as template build labels one) to the registry and
// signs it with the release's key.
func signedTemplate(t testing.TB, e *inCluster) string {
	t.Helper()
	ctx := context.Background()
	base := filepath.Join(t.TempDir(), "rootfs")
	if out, err := exec.Command("bash", "../fixtures/base/busybox-rootfs.sh", base).CombinedOutput(); err != nil {
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
	ref := registrytest.Push(t, e.host+"/templates/busybox:v1", img)
	if _, err := sign.Sign(ctx, ref, e.signer, sign.WithOfflineNoTlog()); err != nil {
		t.Fatalf("sign %s: %v", ref, err)
	}
	return ref.String()
}

// slipway runs the release's own CLI (for this machine's platform) in a
// folder of its own and returns its standard output.
func (e *inCluster) slipway(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(e.rel, "slipway-linux-"+goruntime.GOARCH), args...)
	cmd.Dir = t.TempDir()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("slipway %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// serviceURL is http://<cluster IP>:<port> of Service name in
// slipway-system, its port named http.
func (e *inCluster) serviceURL(t testing.TB, svc string) string {
	t.Helper()
	s, err := e.cs.CoreV1().Services("slipway-system").Get(context.Background(), svc, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range s.Spec.Ports {
		if p.Name == "http" && s.Spec.ClusterIP != "" {
			u := fmt.Sprintf("http://%s:%d", s.Spec.ClusterIP, p.Port)
			resp, err := http.Get(u + "/healthz")
			if err != nil {
				t.Fatalf("Service %s at %s from the host: %v", svc, u, err)
			}
			resp.Body.Close()
			return u
		}
	}
	t.Fatalf("Service %s has no cluster IP with a port named http: %+v", svc, s.Spec)
	return ""
}
