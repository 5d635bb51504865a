package kubeapply

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Which objects are Slipway's alone to prune, without an API server (the
// real ones are in apply_test.go).
func TestForeign(t *testing.T) {
	entry := func(manager, sub, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, Subresource: sub,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
	}
	ours := entry(FieldManager, "", `{"f:metadata":{"f:labels":{}},"f:spec":{"f:replicas":{}}}`)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		mf     []metav1.ManagedFieldsEntry
		want   string // a part of the reason; "" when Slipway may prune
	}{
		{"ours alone", map[string]string{"slipway.dev/pool": "p"}, []metav1.ManagedFieldsEntry{ours}, ""},
		{"a controller's label and status", map[string]string{"slipway.dev/pool": "p"}, []metav1.ManagedFieldsEntry{ours,
			entry("agent-sandbox-controller", "", `{"f:metadata":{"f:labels":{"f:agents.x-k8s.io/sandbox-template-ref-hash":{}}}}`),
			entry("agent-sandbox-controller", "status", `{"f:status":{"f:readyReplicas":{}}}`)}, ""},
		{"no label", nil, []metav1.ManagedFieldsEntry{ours}, "no label slipway.dev/pool"},
		{"another pool's label", map[string]string{"slipway.dev/pool": "q"}, []metav1.ManagedFieldsEntry{ours}, `label slipway.dev/pool is "q"`},
		{"co-owned spec", map[string]string{"slipway.dev/pool": "p"}, []metav1.ManagedFieldsEntry{ours,
			entry("ops", "", `{"f:spec":{"f:replicas":{}}}`)}, `field manager "ops" (Apply) owns spec`},
		{"none of ours", map[string]string{"slipway.dev/pool": "p"}, []metav1.ManagedFieldsEntry{
			entry("kubectl", "", `{"f:metadata":{"f:labels":{}}}`)}, `field manager "slipway" owns none`},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetLabels(tc.labels)
		u.SetManagedFields(tc.mf)
		got := foreign(u, "p")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: reason %q, want %q", tc.name, got, tc.want)
		}
	}
}
