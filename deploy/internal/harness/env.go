//go:build linux

package harness

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/testharness/gittest"
	"github.com/slipway-dev/slipway/testharness/incluster"
	"github.com/slipway-dev/slipway/testharness/kubetest"
	"github.com/slipway-dev/slipway/testharness/need"
	"github.com/slipway-dev/slipway/testharness/pgtest"
)

// Env is what an in-cluster test of the install stands on: a real
// node that routes Services, a registry on the node's bridge holding a
// snapshot release of this tree (pushed, signed, by digest), the host's
// PostgreSQL and a git server, both reachable from pods.
type Env struct {
	begin  time.Time
	C      *kubetest.Cluster
	Node   string
	Dyn    dynamic.Interface
	CS     kubernetes.Interface
	Host   string            // the registry, host:port on the bridge
	Rel    string            // the release's directory
	Images map[string]string // program: reference by digest, as pushed
	Policy []byte            // the release's verification policy
	Signer signature.SignerVerifier
	PG     *pgtest.Server
	Git    *gittest.Server
	// Deploy is the folder of the install's base and overlays: this
	// tree's (Root's deploy), or an earlier version's (the upgrade's).
	Deploy string
	// WarmSize, when set, is pool agents' warm size before seedJobConfig
	// promotes its generation (the generation keeps the pool's at its
	// promotion); else the pool's default.
	WarmSize int
	Timings  []string
}

// Start starts the cluster (with agent-sandbox's controller when
// sandboxes), the registry, the release, PostgreSQL (database slipway) and
// the git server; everything stops when the test ends.
func Start(t testing.TB, sandboxes bool) *Env {
	t.Helper()
	extra := []string{"kube-proxy", "kube-controller-manager", "iptables"}
	if sandboxes {
		extra = append(extra, "kube-scheduler", "agent-sandbox-controller")
	}
	kubetest.SkipUnlessNode(t, extra...)
	_, err := pgtest.BinDir()
	need.Err(t, err)
	ctx := context.Background()
	e := &Env{begin: time.Now(), Deploy: filepath.Join(Root(t), "deploy")}
	e.C, err = kubetest.Start(ctx, t.TempDir(), kubetest.WithServices())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.C.Close)
	t.Cleanup(func() {
		if t.Failed() {
			NodePressure(t, e.C)
			for _, p := range []string{"kube-controller-manager", "kubelet", "agent-sandbox-controller"} {
				t.Logf("%s log ends:\n%s", p, Tail(e.C.Log(p), 60))
			}
		}
	})
	// The registry is on the bridge: the node pulls from it and the
	// runtime's pod verifies the images it grants against it.
	e.Host = BridgeRegistry(t)
	rel, how := SnapshotRelease(t)
	e.Rel = rel
	e.Images, e.Policy, e.Signer = Publish(t, rel, e.Host+"/slipway-dev")
	e.Mark("release " + how + ", pushed")
	// The server's directory must be enterable by the user postgres runs
	// as (a test's temporary directory is not).
	pgDir, err := os.MkdirTemp("", "incluster-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pgDir) })
	e.PG, err = pgtest.Start(ctx, pgDir, pgtest.ListenAlso(kubetest.PodGateway, kubetest.PodCIDR))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.PG.Close)
	if err := e.PG.CreateDatabase(ctx, "slipway"); err != nil {
		t.Fatal(err)
	}
	e.Git = gittest.NewServer(t, gittest.ListenAlso(kubetest.PodGateway))
	n, err := e.C.StartNode(ctx, e.Host)
	if err != nil {
		t.Fatal(err)
	}
	e.Node = n.Name()
	if err := e.C.StartScheduler(ctx); err != nil { // a Deployment's pods name no node
		t.Fatal(err)
	}
	if sandboxes {
		if err := e.C.StartSandboxController(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if e.Dyn, err = e.C.Dynamic(); err != nil {
		t.Fatal(err)
	}
	if e.CS, err = kubernetes.NewForConfig(e.C.Config()); err != nil {
		t.Fatal(err)
	}
	e.Mark("cluster and node up")
	return e
}

// Mark notes how long the test took to get to what.
func (e *Env) Mark(what string) {
	e.Timings = append(e.Timings, what+" at "+time.Since(e.begin).Round(100*time.Millisecond).String())
}

// RuntimeToken is the runtime's API token in Secret slipway-runtime-token.
const RuntimeToken = "incluster-runtime-token-0123456789"

// InstallPlanes applies overlay (applyPlanes) and waits until both
// Deployments have replicas Ready pods.
func (e *Env) InstallPlanes(t testing.TB, overlay string, replicas int64, settings map[string]string) {
	t.Helper()
	e.ApplyPlanes(t, overlay, settings, e.PlaneSecrets())
	for _, d := range incluster.Deployments {
		WaitReady(t, e.C, d, replicas)
	}
	e.Mark("both planes Ready (" + overlay + ")")
}

// PlaneSecrets are the Secrets the install reads (name: key: value;
// docs/install-kubernetes.md): created by the operator, never in the
// manifests.
func (e *Env) PlaneSecrets() map[string]map[string]string {
	return map[string]map[string]string{
		incluster.SecretDB:           {"dsn": e.PG.DSNAlso("slipway")},
		incluster.SecretRuntimeToken: {"token": RuntimeToken},
		incluster.SecretGit:          {"token": ""},
	}
}

// ApplyPlanes applies overlay of e.Deploy (the release's image pinned,
// settings in the settings ConfigMap) with secrets (name: key: value), as
// kubectl apply orders them (incluster.Ordered), and does not wait.
func (e *Env) ApplyPlanes(t testing.TB, overlay string, settings map[string]string, secrets map[string]map[string]string) {
	t.Helper()
	if err := incluster.Apply(context.Background(), e.C.Config(), incluster.Ordered(Objects(t, e.Deploy, overlay, e.Images["slipway"], settings), secrets)); err != nil {
		t.Fatal(err)
	}
}

// Objects is overlay of the install in folder root pinned to image (by
// digest), with the settings ConfigMap's data set (incluster.Objects).
func Objects(t testing.TB, root, overlay, image string, settings map[string]string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := incluster.Objects(root, overlay, image, settings)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// BridgeRegistry is a registry on the node's bridge (incluster.BridgeRegistry
// on kubetest.PodGateway), stopped when the test ends: its host:port.
func BridgeRegistry(t testing.TB) string {
	t.Helper()
	host, stop, err := incluster.BridgeRegistry(kubetest.PodGateway)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return host
}

// ReleaseSums are the sha256 sums (hex) of the release's files, by name,
// from its checksums.txt (incluster.Sums).
func ReleaseSums(t testing.TB, dir string) map[string]string {
	t.Helper()
	sums, err := incluster.Sums(dir)
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// NodePressure says, first, whether the node was under pressure when a test
// failed (DiskPressure: the kubelet evicts pods and admits none, and jobs
// are lost for the host's reason, not the code's) and what the disk had.
func NodePressure(t testing.TB, c *kubetest.Cluster) {
	cs, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		return
	}
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type != corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				t.Errorf("node %s has %s since %s (%s): pods evicted or refused; the failure may be the host's, not the code's",
					n.Name, cond.Type, cond.LastTransitionTime.UTC().Format(time.RFC3339), cond.Message)
			}
		}
	}
	var st syscall.Statfs_t
	if syscall.Statfs(os.TempDir(), &st) == nil {
		t.Logf("the host's %s has %d MiB available", os.TempDir(), st.Bavail*uint64(st.Bsize)>>20)
	}
}

// Clip cuts each line of s to n bytes.
func Clip(s string, n int) string {
	ls := strings.Split(s, "\n")
	for i, l := range ls {
		if len(l) > n {
			ls[i] = l[:n] + " […]"
		}
	}
	return strings.Join(ls, "\n")
}
