package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// CheckStored reads back every object of a multi-document YAML from the
// API server (namespaced objects without a namespace in defaultNS) and
// fails, naming the object and the field path, when a field given is not
// stored as given: a CRD's structural schema silently drops fields it does
// not know, so an object that was accepted may still have lost a field.
// Fields the server adds (defaults, status, metadata) do not count.
func (c *Cluster) CheckStored(ctx context.Context, manifests []byte, defaultNS string) error {
	dyn, err := c.Dynamic()
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config())
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for i := 1; ; i++ {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		want := &unstructured.Unstructured{Object: m}
		gvk := want.GroupVersionKind()
		mp, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("document %d (%s %s): %w", i, gvk.Kind, want.GetName(), err)
		}
		ri := dyn.Resource(mp.Resource)
		var got *unstructured.Unstructured
		if mp.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := want.GetNamespace()
			if ns == "" {
				ns = defaultNS
			}
			got, err = ri.Namespace(ns).Get(ctx, want.GetName(), metav1.GetOptions{})
		} else {
			got, err = ri.Get(ctx, want.GetName(), metav1.GetOptions{})
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, want.GetName(), err)
		}
		delete(m, "metadata")
		for _, path := range []string{"labels", "annotations"} {
			w, _, _ := unstructured.NestedStringMap(want.Object, "metadata", path)
			g := got.GetLabels()
			if path == "annotations" {
				g = got.GetAnnotations()
			}
			for k, v := range w {
				if g[k] != v {
					return fmt.Errorf("%s %s: metadata.%s[%s] is %q, rendered %q", gvk.Kind, want.GetName(), path, k, g[k], v)
				}
			}
		}
		if p := missing("", m, got.Object); p != "" {
			return fmt.Errorf("%s %s: %s rendered but not stored as rendered (the CRD's schema does not hold it?)", gvk.Kind, want.GetName(), p)
		}
	}
}

// missing is the path of the first value of want that got does not hold
// ("" when got holds all of want). Lists must match element by element.
func missing(path string, want, got any) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p := missing(path+"."+k, w[k], g[k]); p != "" {
				return p
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path
		}
		for i := range w {
			if p := missing(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); p != "" {
				return p
			}
		}
		return ""
	default:
		if reflect.DeepEqual(want, got) || fmt.Sprint(want) == fmt.Sprint(got) {
			return ""
		}
		return path
	}
}
