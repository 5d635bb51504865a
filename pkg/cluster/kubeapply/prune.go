package kubeapply

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
)

// neverPruned are kinds whose deletion takes other objects with it.
var neverPruned = map[string]string{
	"Namespace":                "a namespace is never pruned: deleting it deletes everything in it",
	"CustomResourceDefinition": "a CustomResourceDefinition is never pruned: deleting it deletes every object of its kind",
}

// prune deletes the objects of old that are not in desired and are still
// Slipway's alone, last rendered first. It returns the ones it kept.
func (a *Applier) prune(ctx context.Context, pool string, old, desired []Ref) ([]Ref, []Change, error) {
	want := map[string]bool{}
	for _, r := range desired {
		want[r.key()] = true
	}
	var kept []Ref
	var changes []Change
	for i := len(old) - 1; i >= 0; i-- {
		r := old[i]
		if want[r.key()] {
			continue
		}
		if reason, ok := neverPruned[r.Kind]; ok {
			kept = append(kept, r)
			changes = append(changes, Change{Ref: r, Action: Kept, Reason: reason})
			continue
		}
		gvk := schema.FromAPIVersionAndKind(r.APIVersion, r.Kind)
		m, err := a.mapping(gvk)
		if err != nil {
			if meta.IsNoMatchError(err) {
				continue // the kind is gone, and the object with it
			}
			return kept, changes, fmt.Errorf("kubeapply: prune %s: %w", r, err)
		}
		ri := a.dyn.Resource(m.Resource).Namespace(r.Namespace)
		cur, err := ri.Get(ctx, r.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return kept, changes, fmt.Errorf("kubeapply: prune %s: %w: %w", r, ErrApply, err)
		}
		if reason := foreign(cur, pool); reason != "" {
			kept = append(kept, r)
			changes = append(changes, Change{Ref: r, Action: Kept, Reason: reason})
			continue
		}
		uid, rv := cur.GetUID(), cur.GetResourceVersion()
		policy := metav1.DeletePropagationBackground
		err = ri.Delete(ctx, r.Name, metav1.DeleteOptions{
			Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
			PropagationPolicy: &policy,
		})
		switch {
		case err == nil:
			changes = append(changes, Change{Ref: r, Action: Pruned})
		case apierrors.IsNotFound(err):
		case apierrors.IsConflict(err):
			kept = append(kept, r)
			changes = append(changes, Change{Ref: r, Action: Kept, Reason: "changed while it was checked; the next apply looks again"})
		default:
			return kept, changes, fmt.Errorf("kubeapply: prune %s: %w: %w", r, ErrApply, err)
		}
	}
	return kept, changes, nil
}

// foreign says why u is not Slipway's alone to delete, "" when it is: it
// must carry the pool label, and no other field manager may own a field
// outside metadata (status and other subresources do not count).
func foreign(u *unstructured.Unstructured, pool string) string {
	if got, ok := u.GetLabels()[kubeobjects.LabelPool]; !ok {
		return fmt.Sprintf("no label %s", kubeobjects.LabelPool)
	} else if got != pool {
		return fmt.Sprintf("label %s is %q", kubeobjects.LabelPool, got)
	}
	ours := false
	var others []string
	for _, mf := range u.GetManagedFields() {
		if mf.Subresource != "" {
			continue
		}
		if mf.Manager == FieldManager {
			ours = true
			continue
		}
		if fields := ownedOutsideMetadata(mf); len(fields) > 0 {
			others = append(others, fmt.Sprintf("field manager %q (%s) owns %s", mf.Manager, mf.Operation, strings.Join(fields, ", ")))
		}
	}
	switch {
	case len(others) > 0:
		return strings.Join(others, "; ")
	case !ours:
		return fmt.Sprintf("field manager %q owns none of its fields", FieldManager)
	}
	return ""
}

// ownedOutsideMetadata lists the top-level fields of mf other than
// metadata.
func ownedOutsideMetadata(mf metav1.ManagedFieldsEntry) []string {
	if mf.FieldsV1 == nil {
		return nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(mf.FieldsV1.GetRawBytes(), &top); err != nil {
		return []string{"unreadable fields"}
	}
	var out []string
	for k := range top {
		if k != "f:metadata" && k != "." {
			out = append(out, strings.TrimPrefix(k, "f:"))
		}
	}
	sort.Strings(out)
	return out
}
