//go:build linux

package harness

import (
	"bufio"
	"context"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/testharness/gittest"
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
	for _, d := range []string{"slipway-control", "slipway-runtime"} {
		WaitReady(t, e.C, e.Dyn, e.Node, d, replicas)
	}
	e.Mark("both planes Ready (" + overlay + ")")
}

// PlaneSecrets are the Secrets the install reads (name: key: value;
// docs/install-kubernetes.md): created by the operator, never in the
// manifests.
func (e *Env) PlaneSecrets() map[string]map[string]string {
	return map[string]map[string]string{
		"slipway-db":            {"dsn": e.PG.DSNAlso("slipway")},
		"slipway-runtime-token": {"token": RuntimeToken},
		"slipway-git":           {"token": ""},
	}
}

// ApplyPlanes applies overlay of e.deploy (the release's image pinned,
// settings in the settings ConfigMap) with secrets (name: key: value), as
// kubectl apply orders them, and does not wait.
func (e *Env) ApplyPlanes(t testing.TB, overlay string, settings map[string]string, secrets map[string]map[string]string) {
	t.Helper()
	objs := Objects(t, e.Deploy, overlay, e.Images["slipway"], settings)
	var ordered []*unstructured.Unstructured
	for _, o := range objs { // namespaces first, as kubectl apply orders them
		if o.GetKind() == "Namespace" {
			ordered = append(ordered, o)
		}
	}
	for name, data := range secrets {
		sd := map[string]any{}
		for k, v := range data {
			sd[k] = v
		}
		ordered = append(ordered, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata":   map[string]any{"name": name, "namespace": "slipway-system"},
			"stringData": sd,
		}})
	}
	for _, o := range objs {
		if o.GetKind() != "Namespace" {
			ordered = append(ordered, o)
		}
	}
	Apply(t, e.C.Config(), e.Dyn, ordered)
}

// Objects is overlay as kustomize builds it from the base and overlays in
// folder root once the base's images entry pins image (by digest), as make
// pin-deploy writes it, with the settings ConfigMap's data set, as an
// overlay of the operator's own would (configMapGenerator behavior:
// merge).
func Objects(t testing.TB, root, overlay, image string, settings map[string]string) []*unstructured.Unstructured {
	t.Helper()
	name, digest, ok := strings.Cut(image, "@")
	if !ok {
		t.Fatalf("image %q is not by digest", image)
	}
	mem := filesys.MakeFsInMemory()
	for _, top := range []string{"base", "overlays"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			p, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if p == filepath.Join("base", "kustomization.yaml") {
				s := string(b)
				for _, r := range [][2]string{
					{"newName: ghcr.io/slipway-dev/slipway\n", "newName: " + name + "\n"},
					{"    newTag: v0.0.0-unreleased\n", ""},
					{"digest: sha256:0000000000000000000000000000000000000000000000000000000000000000", "digest: " + digest},
				} {
					if !strings.Contains(s, r[0]) {
						t.Fatalf("%s has no %q to pin", path, r[0])
					}
					s = strings.Replace(s, r[0], r[1], 1)
				}
				b = []byte(s)
			}
			return mem.WriteFile(filepath.Join("/deploy", p), b)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/deploy/overlays/"+overlay)
	if err != nil {
		t.Fatalf("kustomize build overlays/%s with the release's image: %v", overlay, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetKind() == "ConfigMap" && strings.HasPrefix(u.GetName(), "slipway-settings-") {
			data := map[string]any{}
			for k, v := range settings {
				data[k] = v
			}
			u.Object["data"] = data
		}
		out = append(out, u)
	}
	return out
}

// BridgeRegistry starts go-containerregistry's in-process registry on the
// node's bridge (kubetest.PodGateway, an RFC 1918 address, so clients
// speak plain HTTP to it as to 127.0.0.1) and returns its host:port.
func BridgeRegistry(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", kubetest.PodGateway+":0")
	if err != nil {
		t.Fatalf("a registry on the bridge: %v", err)
	}
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return l.Addr().String()
}

// ReleaseSums are the sha256 sums (hex) of the release's files, by name,
// from its checksums.txt.
func ReleaseSums(t testing.TB, dir string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 {
			out[strings.TrimPrefix(f[1], "*")] = f[0]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
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
