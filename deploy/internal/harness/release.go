//go:build linux

package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"syscall"
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

// SnapshotRelease is a snapshot release of this tree for the host's
// platform (slipway release --snapshot). A clean tree's is kept in the
// user's cache folder, by commit, and reused (two releases of one commit
// are identical; the build takes minutes on 2 shared cores); a dirty
// tree's is built for this test only. $SLIPWAY_RELEASE names a release
// built earlier instead (make release SNAPSHOT=1 RELEASE_OUT=DIR), whose
// version the test logs. It returns the release's directory and how it
// came to be (built, reused, given).
func SnapshotRelease(t testing.TB) (string, string) {
	t.Helper()
	if dir := os.Getenv("SLIPWAY_RELEASE"); dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, "checksums.txt"))
		if err != nil {
			t.Fatalf("SLIPWAY_RELEASE=%s is not a release: %v", dir, err)
		}
		t.Logf("the release of SLIPWAY_RELEASE=%s (checksums.txt: %d lines), not one of this tree", dir, strings.Count(string(b), "\n"))
		return dir, "given by SLIPWAY_RELEASE"
	}
	root := Root(t)
	commit, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	status, err := exec.Command("git", "-C", root, "status", "--porcelain").Output()
	if err != nil {
		t.Fatalf("git status: %v", err)
	}
	if len(status) > 0 {
		out := filepath.Join(t.TempDir(), "release")
		BuildRelease(t, root, out)
		return out, "built, the tree being dirty"
	}
	return keptRelease(t, "incluster-release", strings.TrimSpace(string(commit)), func(out string) { BuildRelease(t, root, out) })
}

// PreviousRelease is a snapshot release of the previous version
// (tools/previous-version's commit: the build make skew puts beside this
// tree's), built by that commit's own slipway from a clone of this
// repository checked out at it, and kept in the user's cache folder by
// commit as snapshotRelease keeps this tree's (in a folder of its own, so
// a release of this tree never replaces it). It returns the release's
// directory, how it came to be and the commit.
func PreviousRelease(t testing.TB) (string, string, string) {
	t.Helper()
	commit := PreviousVersion(t)
	dir, how := keptRelease(t, "incluster-release-previous", commit, func(out string) {
		src := filepath.Join(t.TempDir(), "src")
		for _, args := range [][]string{
			{"clone", "-q", "--shared", "--no-checkout", Root(t), src},
			{"-C", src, "checkout", "-q", "--detach", commit},
		} {
			if b, err := exec.Command("git", args...).CombinedOutput(); err != nil {
				t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, b)
			}
		}
		BuildRelease(t, src, out)
	})
	return dir, how, commit
}

// PreviousVersion is the commit tools/previous-version names, which this
// clone must hold.
func PreviousVersion(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Root(t), "tools", "previous-version"))
	if err != nil {
		t.Fatal(err)
	}
	var commit string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			commit = l
			break
		}
	}
	if err := exec.Command("git", "-C", Root(t), "cat-file", "-e", commit+"^{commit}").Run(); commit == "" || err != nil {
		t.Fatalf("tools/previous-version names %q, which this clone does not have (a shallow clone? fetch its history): %v", commit, err)
	}
	return commit
}

// BuildRelease builds src's slipway (go build ./cmd/slipway, in src) and
// has it write its snapshot release for the host's platform to out.
func BuildRelease(t testing.TB, src, out string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "slipway")
	build := exec.Command("go", "build", "-o", bin, "./cmd/slipway")
	build.Dir = src
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/slipway in %s: %v\n%s", src, err, b)
	}
	cmd := exec.Command(bin, "release", "--snapshot", "--platform", "linux/"+runtime.GOARCH, "--out", out)
	cmd.Dir = src
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("slipway release --snapshot in %s: %v\n%s", src, err, b)
	}
}

// keptRelease is commit's release for the host's platform in folder kind
// of the user's cache: reused when there, else made by build (into a
// temporary folder beside it, renamed when whole) and kept beside the
// folder's two newest other releases (the rest are removed). The folder is
// locked meanwhile (a lock file), so test packages running at once build a
// commit's release once and never remove one another uses. It returns the
// release's directory and how it came to be.
func keptRelease(t testing.TB, kind, commit string, build func(out string)) (string, string) {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	cache = filepath.Join(cache, "slipway", kind)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(cache, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close() // and unlocked
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("lock %s: %v", lock.Name(), err)
	}
	dir := filepath.Join(cache, commit+"-linux-"+runtime.GOARCH)
	if _, err := os.Stat(filepath.Join(dir, "checksums.txt")); err == nil {
		return dir, "reused from " + dir
	}
	tmp, err := os.MkdirTemp(cache, ".build-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	build(filepath.Join(tmp, "out"))
	old, _ := filepath.Glob(filepath.Join(cache, "*-linux-*"))
	sort.Slice(old, func(i, j int) bool { return modTime(old[i]).After(modTime(old[j])) })
	for i, o := range old { // the two newest other releases are kept
		if i >= 2 {
			os.RemoveAll(o)
		}
	}
	if err := os.Rename(filepath.Join(tmp, "out"), dir); err != nil {
		t.Fatal(err)
	}
	return dir, "built and kept in " + dir
}

// modTime is file's modification time (zero when it cannot be read).
func modTime(file string) time.Time {
	fi, err := os.Stat(file)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// Publish pushes the release in dir to repository (signed with a key made
// for the test) and returns each program's image by digest, as the
// registry holds it, the verification policy of what it pushed and the
// key that signed it.
func Publish(t testing.TB, dir, repository string) (map[string]string, []byte, signature.SignerVerifier) {
	t.Helper()
	priv, pub, err := sign.GenerateKeys([]byte("test"))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := sign.LoadSigner(priv, []byte("test"))
	if err != nil {
		t.Fatal(err)
	}
	return PublishSigned(t, dir, repository, sv), selfrelease.Policy(pub, repository, selfrelease.Programs), sv
}

// PublishSigned pushes the release in dir to repository, signed with sv,
// and returns each program's image by digest, as the registry holds it.
func PublishSigned(t testing.TB, dir, repository string, sv signature.SignerVerifier) map[string]string {
	t.Helper()
	res, err := selfrelease.Publish(context.Background(), dir, selfrelease.PublishOptions{Repository: repository, Signer: sv})
	if err != nil {
		t.Fatalf("publish the release in %s: %v", dir, err)
	}
	out := map[string]string{}
	for _, im := range res.Images {
		if !ByDigest.MatchString(im.Ref) {
			t.Fatalf("release image %s pushed as %q, not by digest", im.Program, im.Ref)
		}
		out[im.Program] = im.Ref
	}
	for _, p := range []string{"slipway", "slipway-runner"} {
		if out[p] == "" {
			t.Fatalf("the release in %s pushed no %s image: %v", dir, p, out)
		}
	}
	return out
}

// Apply server-side applies objs in order, as kubectl Apply does.
func Apply(t testing.TB, cfg *rest.Config, dyn dynamic.Interface, objs []*unstructured.Unstructured) {
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

// ByDigest is a reference by digest.
var ByDigest = regexp.MustCompile(`^[a-z0-9.:/_-]+@sha256:[0-9a-f]{64}$`)

var DeploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// WaitReady waits (at most 3 minutes: a loaded machine) until Deployment
// name has replicas Ready pods on node; when it does not, it shows the
// pods' state and the containers' logs.
func WaitReady(t testing.TB, c *kubetest.Cluster, dyn dynamic.Interface, node, name string, replicas int64) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		d, err := dyn.Resource(DeploymentsGVR).Namespace("slipway-system").Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			if r, _, _ := unstructured.NestedInt64(d.Object, "status", "readyReplicas"); r == replicas {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Deployment %s has not %d Ready replicas after 3m on node %s:\n%s", name, replicas, node, PodsState(t, c, name))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// PodsState is the status and log of app name's pods, for a failure.
func PodsState(t testing.TB, c *kubetest.Cluster, name string) string {
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
