//go:build linux

package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/release/selfrelease"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/kubetest"
)

// The install in a cluster: overlays/single applied, as kubectl apply -k
// applies it, to a real node that routes Services (kubetest.WithServices),
// with Slipway's images from a snapshot release of this tree pushed to the
// node's registry and pinned by digest, its database the host's
// PostgreSQL and its config repository a git server on the node's bridge.
// Both planes' pods become Ready (the kubelet's probes of /readyz: the
// control plane reaches its database and config repository, the runtime
// its cluster, config repository and every verb of its Role), and their
// /readyz, read through the API server's service proxy, says so.
func TestInClusterSingle(t *testing.T) {
	e := startInCluster(t, false)
	ctx := context.Background()
	// The runtime verifies what it runs against the repository's policy:
	// the release's own (its key, its builder, its images).
	e.git.Seed(t, "config.git", "main", map[string]string{"policies/verification.yaml": string(e.policy)})
	e.installPlanes(t, "single", 1, map[string]string{"repo": e.git.URLAlso("config.git"), "branch": "main", "pool": "default"})
	for _, svc := range []string{"slipway-control", "slipway-runtime"} {
		b, err := e.cs.CoreV1().Services("slipway-system").ProxyGet("http", svc, "http", "/readyz", nil).DoRaw(ctx)
		if err != nil {
			t.Fatalf("GET /readyz of Service %s through the API server: %v: %s", svc, err, b)
		}
		var rd struct{ Ready bool }
		if err := json.Unmarshal(b, &rd); err != nil || !rd.Ready {
			t.Fatalf("Service %s's /readyz: %s (%v)", svc, b, err)
		}
	}
	t.Logf("%s", strings.Join(e.timings, ", "))
}

// snapshotRelease is a snapshot release of this tree for the host's
// platform (slipway release --snapshot). A clean tree's is kept in the
// user's cache folder, by commit, and reused (two releases of one commit
// are identical; the build takes minutes on 2 shared cores); a dirty
// tree's is built for this test only. $SLIPWAY_RELEASE names a release
// built earlier instead (make release SNAPSHOT=1 RELEASE_OUT=DIR), whose
// version the test logs. It returns the release's directory and how it
// came to be (built, reused, given).
func snapshotRelease(t testing.TB) (string, string) {
	t.Helper()
	if dir := os.Getenv("SLIPWAY_RELEASE"); dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, "checksums.txt"))
		if err != nil {
			t.Fatalf("SLIPWAY_RELEASE=%s is not a release: %v", dir, err)
		}
		t.Logf("the release of SLIPWAY_RELEASE=%s (checksums.txt: %d lines), not one of this tree", dir, strings.Count(string(b), "\n"))
		return dir, "given by SLIPWAY_RELEASE"
	}
	commit, err := exec.Command("git", "-C", "..", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	status, err := exec.Command("git", "-C", "..", "status", "--porcelain").Output()
	if err != nil {
		t.Fatalf("git status: %v", err)
	}
	platform := "linux/" + runtime.GOARCH
	build := func(out string) {
		bin := filepath.Join(t.TempDir(), "slipway")
		if b, err := exec.Command("go", "build", "-o", bin, "../cmd/slipway").CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/slipway: %v\n%s", err, b)
		}
		cmd := exec.Command(bin, "release", "--snapshot", "--platform", platform, "--out", out)
		cmd.Dir = ".."
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("slipway release --snapshot: %v\n%s", err, b)
		}
	}
	if len(status) > 0 {
		out := filepath.Join(t.TempDir(), "release")
		build(out)
		return out, "built, the tree being dirty"
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	cache = filepath.Join(cache, "slipway", "incluster-release")
	dir := filepath.Join(cache, strings.TrimSpace(string(commit))+"-"+strings.ReplaceAll(platform, "/", "-"))
	if _, err := os.Stat(filepath.Join(dir, "checksums.txt")); err == nil {
		return dir, "reused from " + dir
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(cache, ".build-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	build(filepath.Join(tmp, "out"))
	old, _ := filepath.Glob(filepath.Join(cache, "*-linux-*"))
	for _, o := range old { // one commit's release is kept
		os.RemoveAll(o)
	}
	if err := os.Rename(filepath.Join(tmp, "out"), dir); err != nil {
		t.Fatal(err)
	}
	return dir, "built and kept in " + dir
}

// publish pushes the release in dir to repository (signed with a key made
// for the test) and returns each program's image by digest, as the
// registry holds it, the verification policy of what it pushed and the
// key that signed it.
func publish(t testing.TB, dir, repository string) (map[string]string, []byte, signature.SignerVerifier) {
	t.Helper()
	priv, pub, err := sign.GenerateKeys([]byte("test"))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := sign.LoadSigner(priv, []byte("test"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := selfrelease.Publish(context.Background(), dir, selfrelease.PublishOptions{Repository: repository, Signer: sv})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, im := range res.Images {
		if !byDigest.MatchString(im.Ref) {
			t.Fatalf("release image %s pushed as %q, not by digest", im.Program, im.Ref)
		}
		out[im.Program] = im.Ref
	}
	for _, p := range []string{"slipway", "slipway-runner"} {
		if out[p] == "" {
			t.Fatalf("the release pushed no %s image: %v", p, out)
		}
	}
	return out, selfrelease.Policy(pub, repository, selfrelease.Programs), sv
}

// apply server-side applies objs in order, as kubectl apply does.
func apply(t testing.TB, cfg *rest.Config, dyn dynamic.Interface, objs []*unstructured.Unstructured) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk.Kind, o.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if ns := o.GetNamespace(); ns != "" {
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		if _, err := ri.Apply(context.Background(), o.GetName(), o, metav1.ApplyOptions{FieldManager: "incluster-test", Force: true}); err != nil {
			t.Fatalf("apply %s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
}

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// waitReady waits (at most 3 minutes: a loaded machine) until Deployment
// name has replicas Ready pods on node; when it does not, it shows the
// pods' state and the containers' logs.
func waitReady(t testing.TB, c *kubetest.Cluster, dyn dynamic.Interface, node, name string, replicas int64) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		d, err := dyn.Resource(deploymentsGVR).Namespace("slipway-system").Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			if r, _, _ := unstructured.NestedInt64(d.Object, "status", "readyReplicas"); r == replicas {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Deployment %s has not %d Ready replicas after 3m on node %s:\n%s", name, replicas, node, podsState(t, c, name))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// podsState is the status and log of app name's pods, for a failure.
func podsState(t testing.TB, c *kubetest.Cluster, name string) string {
	cs, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		return err.Error()
	}
	pods, err := cs.CoreV1().Pods("slipway-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + name})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		st, _ := json.MarshalIndent(p.Status.ContainerStatuses, "", "  ")
		fmt.Fprintf(&b, "pod %s: %s %v\n%s\n", p.Name, p.Status.Phase, p.Status.Conditions, st)
		log, err := cs.CoreV1().Pods("slipway-system").GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
		fmt.Fprintf(&b, "log (%v):\n%s\n", err, log)
	}
	return b.String()
}
