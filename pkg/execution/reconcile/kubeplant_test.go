package reconcile_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/testharness/kubetest"
)

var (
	claimsGVR    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	warmPoolsGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	sandboxesGVR = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	podsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	secretsGVR   = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// kubeWorld is a real API server (etcd, kube-apiserver, agent-sandbox's
// CRDs) with one namespace, the Kubernetes backend on it, a run store and
// cleanup records. No controller runs: the objects are the test's, as
// agent-sandbox's controller writes them (a claim bound to a Sandbox it
// controls, which controls a pod), so nothing but the reconciler deletes
// them, and a pod placed on a node no kubelet serves stays terminating
// once deleted, as on a node that went away.
type kubeWorld struct {
	c       *kubetest.Cluster
	dyn     dynamic.Interface
	ns      string
	be      *kubesandbox.Backend
	store   *runs.SQLite
	records *reconcile.Records
	dir     string
}

func newKubeWorld(tb testing.TB) *kubeWorld {
	tb.Helper()
	c := kubetest.New(tb)
	ctx := context.Background()
	w := &kubeWorld{c: c, ns: "sweep", dir: tb.TempDir()}
	if err := c.PrepareNamespace(ctx, w.ns); err != nil {
		tb.Fatal(err)
	}
	var err error
	if w.dyn, err = c.Dynamic(); err != nil {
		tb.Fatal(err)
	}
	if w.be, err = kubesandbox.New(c.Config(), w.ns, kubesandbox.WithReadyTimeout(30*time.Second)); err != nil {
		tb.Fatal(err)
	}
	if w.store, err = runs.OpenSQLite(ctx, filepath.Join(w.dir, runs.StateFile)); err != nil {
		tb.Fatal(err)
	}
	if w.records, err = reconcile.OpenRecords(ctx, filepath.Join(w.dir, reconcile.RecordsFile)); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { w.store.Close(); w.records.Close() })
	return w
}

func (w *kubeWorld) res(gvr schema.GroupVersionResource) dynamic.ResourceInterface {
	return w.dyn.Resource(gvr).Namespace(w.ns)
}

func controllerRef(u *unstructured.Unstructured) []any {
	return []any{map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "name": u.GetName(), "uid": string(u.GetUID()),
		"controller": true, "blockOwnerDeletion": true}}
}

// sandboxOf creates Sandbox name (controlled by owner when given) and
// its pod (not scheduled: no scheduler runs).
func (w *kubeWorld) sandboxOf(tb testing.TB, name, pool, gen string, owner *unstructured.Unstructured) *unstructured.Unstructured {
	tb.Helper()
	ctx := context.Background()
	labels := map[string]any{kubeobjects.LabelPool: pool, kubeobjects.LabelGeneration: kubeobjects.GenerationLabel(gen)}
	meta := map[string]any{"name": name, "labels": labels, "annotations": map[string]any{kubeobjects.AnnotationGenerationID: gen}}
	if owner != nil {
		meta["ownerReferences"] = controllerRef(owner)
	}
	container := map[string]any{"name": "workspace", "image": "busybox"}
	sb, err := w.res(sandboxesGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": meta,
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{"containers": []any{container}}}},
	}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	_, err = w.res(podsGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "labels": labels, "ownerReferences": controllerRef(sb)},
		"spec":     map[string]any{"containers": []any{container}},
	}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return sb
}

// claim creates the SandboxClaim of owner on pool's generation gen, bound
// and Ready to Sandbox "sb-<owner>" (which it controls, with its pod), as
// agent-sandbox's controller leaves a claim it bound.
func (w *kubeWorld) claim(tb testing.TB, owner, pool, gen string, proof bool) (claim, sb string) {
	tb.Helper()
	ctx := context.Background()
	labels := map[string]any{kubesandbox.LabelClaim: "true", kubeobjects.LabelPool: pool, kubeobjects.LabelGeneration: kubeobjects.GenerationLabel(gen)}
	if proof {
		labels[kubesandbox.LabelProof] = "true"
	}
	name := kubesandbox.ClaimName(owner)
	c, err := w.res(claimsGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kubeobjects.ExtensionsAPIVersion, "kind": "SandboxClaim",
		"metadata": map[string]any{"name": name, "labels": labels,
			"annotations": map[string]any{kubesandbox.AnnotationOwner: owner, kubeobjects.AnnotationGenerationID: gen}},
		"spec": map[string]any{"warmPoolRef": map[string]any{"name": kubeobjects.ObjectName(pool, gen)}},
	}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	sb = "sb-" + name[len("sw-"):]
	w.sandboxOf(tb, sb, pool, gen, c)
	now := time.Now().UTC().Format(time.RFC3339)
	c.Object["status"] = map[string]any{"sandbox": map[string]any{"name": sb},
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "message": "bound", "lastTransitionTime": now}}}
	if _, err := w.res(claimsGVR).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		tb.Fatal(err)
	}
	return name, sb
}

// warmPool creates the SandboxWarmPool of pool's generation gen with
// members warm members (Sandboxes it controls, with their pods).
func (w *kubeWorld) warmPool(tb testing.TB, pool, gen string, members int) (name string, sbs []string) {
	tb.Helper()
	name = kubeobjects.ObjectName(pool, gen)
	wp, err := w.res(warmPoolsGVR).Create(context.Background(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kubeobjects.ExtensionsAPIVersion, "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": name,
			"labels":      map[string]any{kubeobjects.LabelPool: pool, kubeobjects.LabelGeneration: kubeobjects.GenerationLabel(gen)},
			"annotations": map[string]any{kubeobjects.AnnotationGenerationID: gen}},
		"spec": map[string]any{"replicas": int64(members), "sandboxTemplateRef": map[string]any{"name": name}},
	}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range members {
		sb := fmt.Sprintf("%s-m%d", name, i)
		w.sandboxOf(tb, sb, pool, gen, wp)
		sbs = append(sbs, sb)
	}
	return name, sbs
}

// pod creates a pod of pool (controlled by sb when given) placed on node:
// "" leaves it unscheduled; a node no kubelet serves makes it stay
// terminating once deleted.
func (w *kubeWorld) pod(tb testing.TB, name, pool, node string, sb *unstructured.Unstructured) {
	tb.Helper()
	meta := map[string]any{"name": name, "labels": map[string]any{kubeobjects.LabelPool: pool}}
	if sb != nil {
		meta["ownerReferences"] = controllerRef(sb)
	}
	_, err := w.res(podsGVR).Create(context.Background(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod", "metadata": meta,
		"spec": map[string]any{"nodeName": node, "containers": []any{map[string]any{"name": "workspace", "image": "busybox"}}},
	}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
}

// secret creates a Secret holding a credential of run.
func (w *kubeWorld) secret(tb testing.TB, name, pool, run string) {
	tb.Helper()
	_, err := w.res(secretsGVR).Create(context.Background(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name, "labels": map[string]any{kubesandbox.LabelRun: run, kubeobjects.LabelPool: pool}},
		"data":     map[string]any{"token": "c2VjcmV0"},
	}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
}

// run records run id on sandbox sb at attempt 1 with status st.
func (w *kubeWorld) run(tb testing.TB, id, pool, sb string, st runmanifest.Status) {
	tb.Helper()
	ctx := context.Background()
	if err := w.store.Create(ctx, &runmanifest.Manifest{RunID: id, Pool: pool, SandboxID: sb, AllocationAttempt: 1, Status: runmanifest.StatusGranted}); err != nil {
		tb.Fatal(err)
	}
	if st != runmanifest.StatusGranted {
		if err := w.store.Update(ctx, id, func(m *runmanifest.Manifest) error { m.Status = st; return nil }); err != nil {
			tb.Fatal(err)
		}
	}
}

// exists says whether the object of gvr called name is still there.
func (w *kubeWorld) exists(tb testing.TB, gvr schema.GroupVersionResource, name string) bool {
	tb.Helper()
	_, err := w.res(gvr).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		tb.Fatal(err)
	}
	return err == nil
}
