package kubetest_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/slipway-dev/slipway/testharness/kubetest"
)

// StopAPIServer takes the API server away (requests fail) and
// RestartAPIServer brings it back on the same address with what etcd held;
// restarting one that runs is an error.
func TestRestartAPIServer(t *testing.T) {
	c := kubetest.New(t)
	ctx := context.Background()
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	cms := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("default")
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "kept"}, "data": map[string]any{"k": "v"}}}
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartAPIServer(ctx); err == nil {
		t.Fatal("RestartAPIServer of a running API server did not fail")
	}
	c.StopAPIServer()
	if _, err := cms.Get(ctx, "kept", metav1.GetOptions{}); err == nil {
		t.Fatal("the API server still answers after StopAPIServer")
	}
	if err := c.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := cms.Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if v, _, _ := unstructured.NestedString(got.Object, "data", "k"); v != "v" {
		t.Fatalf("after the restart the ConfigMap holds %v", got.Object["data"])
	}
}
