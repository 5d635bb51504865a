package render_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"

	"github.com/slipway-dev/slipway/pkg/cluster/kubeapply"
	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/testharness/kubetest"
)

// The golden render is accepted by a real kube-apiserver's validation of
// agent-sandbox v0.5.6's own CRDs, and stored field for field as rendered
// (a structural schema drops fields it does not know without an error).
// No pod runs here: the runtime class, node selector and images are only
// validated, never used.
func TestGoldenAcceptedByAPIServer(t *testing.T) {
	c := kubetest.New(t)
	tree, rev, _ := commit(t, goldenTree(t))
	ctx := context.Background()
	res, err := render.Pool(ctx, tree, "agents", rev, render.WithInsecureSkipVerify())
	if err != nil {
		t.Fatal(err)
	}
	a, err := kubeapply.New(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	cs, err := a.Apply(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Changes) != 8 {
		t.Fatalf("want 8 objects (namespace, config map, 4 templates, 2 warm pools), got %v", cs.Changes)
	}
	if err := c.CheckStored(ctx, res.YAML, "default"); err != nil {
		t.Fatal(err)
	}
}

// A rendered sandbox pod meets Pod Security "restricted", and the label on
// the namespace Slipway renders is enforced, not only set: the real API
// server's PodSecurity admission (built in, on by default) admits the pod
// of every rendered SandboxTemplate in that namespace and refuses each
// copy weakened in one field. agent-sandbox's controller makes its pods
// from exactly this pod template, so it is refused in the same way. No
// node: the pods are admitted and stored, never run.
func TestRenderedPodsAdmittedAsRestricted(t *testing.T) {
	c := kubetest.New(t)
	tree, rev, _ := commit(t, goldenTree(t))
	ctx := context.Background()
	res, err := render.Pool(ctx, tree, "agents", rev, render.WithInsecureSkipVerify())
	if err != nil {
		t.Fatal(err)
	}
	a, err := kubeapply.New(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(ctx, res); err != nil {
		t.Fatal(err)
	}
	const ns = "sandboxes"
	if err := c.PrepareNamespace(ctx, ns); err != nil { // the default ServiceAccount, as a controller-manager would
		t.Fatal(err)
	}
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	got, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range kubeobjects.PodSecurityLabels() {
		if got.GetLabels()[k] != v {
			t.Errorf("namespace %s: label %s=%q, want %q", ns, k, got.GetLabels()[k], v)
		}
	}
	templates, err := dyn.Resource(schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}).
		Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(templates.Items) != 4 {
		t.Fatalf("templates: %v, %d", err, len(templates.Items))
	}
	pods := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace(ns)
	runtimeClasses := dyn.Resource(schema.GroupVersionResource{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses"})
	for i, tmpl := range templates.Items {
		spec, _, _ := unstructured.NestedMap(tmpl.Object, "spec", "podTemplate", "spec")
		if rc, _ := spec["runtimeClassName"].(string); rc != "" { // the RuntimeClass admission wants it to exist
			_, err := runtimeClasses.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": map[string]any{"name": rc}, "handler": "runc"}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
		pod := func(name string, weaken func(spec map[string]any)) *unstructured.Unstructured {
			s := runtime.DeepCopyJSONValue(spec).(map[string]any)
			if weaken != nil {
				weaken(s)
			}
			return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"name": name, "namespace": ns}, "spec": s}}
		}
		if _, err := pods.Create(ctx, pod(fmt.Sprintf("rendered-%d", i), nil), metav1.CreateOptions{}); err != nil {
			t.Errorf("the pod of SandboxTemplate %s was refused: %v", tmpl.GetName(), err)
		}
		if i > 0 {
			continue // one template is enough to show each weakening refused
		}
		containers := func(s map[string]any) []any {
			return append(slices.Clone(s["initContainers"].([]any)), s["containers"].([]any)...)
		}
		for _, w := range []struct {
			name, refusal string
			weaken        func(s map[string]any)
		}{
			{"no-run-as-non-root", "runAsNonRoot", func(s map[string]any) {
				delete(s["securityContext"].(map[string]any), "runAsNonRoot")
			}},
			{"root", "runAsUser=0", func(s map[string]any) {
				s["securityContext"].(map[string]any)["runAsUser"] = int64(0)
			}},
			{"no-seccomp", "seccompProfile", func(s map[string]any) {
				delete(s["securityContext"].(map[string]any), "seccompProfile")
			}},
			{"escalation", "allowPrivilegeEscalation", func(s map[string]any) {
				for _, c := range containers(s) {
					delete(c.(map[string]any)["securityContext"].(map[string]any), "allowPrivilegeEscalation")
				}
			}},
			{"capabilities", "capabilities", func(s map[string]any) {
				for _, c := range containers(s) {
					delete(c.(map[string]any)["securityContext"].(map[string]any), "capabilities")
				}
			}},
		} {
			_, err := pods.Create(ctx, pod("weakened-"+w.name, w.weaken), metav1.CreateOptions{})
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted`) || !strings.Contains(err.Error(), w.refusal) {
				t.Errorf("a pod weakened (%s) was not refused by PodSecurity naming %s: %v", w.name, w.refusal, err)
			}
		}
	}
}
