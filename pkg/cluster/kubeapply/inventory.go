package kubeapply

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
)

// InventoryKey is the key of the inventory ConfigMap's data holding the
// JSON list of the objects Slipway applied for the pool.
const InventoryKey = "objects.json"

// InventoryName is the name of pool's inventory ConfigMap.
func InventoryName(pool string) string { return "slipway-inventory-" + pool }

// Ref names one object.
type Ref struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// String is "Kind/namespace/name", or "Kind/name" for a cluster-scoped
// object.
func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

// key identifies the object whatever API version names it.
func (r Ref) key() string {
	return schema.FromAPIVersionAndKind(r.APIVersion, r.Kind).GroupKind().String() + "/" + r.Namespace + "/" + r.Name
}

func refOf(u *unstructured.Unstructured) Ref {
	return Ref{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

// union is a then the refs of b not in a.
func union(a, b []Ref) []Ref {
	seen := map[string]bool{}
	var out []Ref
	for _, r := range append(append([]Ref{}, a...), b...) {
		if !seen[r.key()] {
			seen[r.key()] = true
			out = append(out, r)
		}
	}
	return out
}

// inventory is a pool's inventory ConfigMap.
type inventory struct {
	a        *Applier
	pool, ns string
	name     string
}

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// inventoryFor places pool's inventory in the namespace of its
// SandboxTemplates (else of its first namespaced object, else the default
// namespace).
func (a *Applier) inventoryFor(pool string, objs []object) *inventory {
	inv := &inventory{a: a, pool: pool, name: InventoryName(pool)}
	for _, o := range objs {
		if o.ref.Kind == kubeobjects.KindSandboxTemplate && o.ref.Namespace != "" {
			inv.ns = o.ref.Namespace
			return inv
		}
	}
	for _, o := range objs {
		if o.ref.Namespace != "" {
			inv.ns = o.ref.Namespace
			return inv
		}
	}
	inv.ns = a.opts.namespace
	return inv
}

func (inv *inventory) String() string { return "ConfigMap/" + inv.ns + "/" + inv.name }

// read returns the recorded objects, none when there is no inventory yet.
func (inv *inventory) read(ctx context.Context) ([]Ref, error) {
	cm, err := inv.a.dyn.Resource(configMaps).Namespace(inv.ns).Get(ctx, inv.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kubeapply: read inventory %s: %w: %w", inv, ErrApply, err)
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", InventoryKey)
	var refs []Ref
	if err := json.Unmarshal([]byte(data), &refs); err != nil {
		return nil, fmt.Errorf("kubeapply: inventory %s: data %s: %w (fix or delete it; nothing was applied)", inv, InventoryKey, err)
	}
	for i, r := range refs {
		if r.APIVersion == "" || r.Kind == "" || r.Name == "" {
			return nil, fmt.Errorf("kubeapply: inventory %s: entry %d has no apiVersion, kind or name (fix or delete it; nothing was applied)", inv, i+1)
		}
	}
	return refs, nil
}

// write records refs, sorted, as the inventory (Slipway owns it: forced).
func (inv *inventory) write(ctx context.Context, refs []Ref) error {
	refs = append([]Ref{}, refs...)
	sort.Slice(refs, func(i, j int) bool { return refs[i].key() < refs[j].key() })
	data, err := json.MarshalIndent(refs, "", "  ")
	if err != nil {
		return err
	}
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":      inv.name,
			"namespace": inv.ns,
			"labels":    map[string]any{kubeobjects.LabelPool: inv.pool},
		},
		"data": map[string]any{InventoryKey: string(data) + "\n"},
	}}
	_, err = inv.a.dyn.Resource(configMaps).Namespace(inv.ns).Apply(ctx, inv.name, cm, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("kubeapply: write inventory %s: %w: %w", inv, ErrApply, err)
	}
	return nil
}
