package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
)

// fieldManager owns what the harness creates.
const fieldManager = "kubetest"

var (
	crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	nsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	saGVR  = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	cmGVR  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// InstallCRDs applies the CustomResourceDefinitions in files (another
// project's, beside agent-sandbox's that Start installs) and waits until
// each is established and its kind is in discovery.
func (c *Cluster) InstallCRDs(ctx context.Context, files ...string) error {
	return c.installCRDs(ctx, files)
}

// installCRDs applies every CRD file and waits until each is established
// and its kind is in discovery.
func (c *Cluster) installCRDs(ctx context.Context, files []string) error {
	dyn, err := c.Dynamic()
	if err != nil {
		return err
	}
	var crds []*unstructured.Unstructured
	for _, f := range files {
		objs, err := readObjects(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			// The harness runs agent-sandbox's controller without its
			// webhook (--enable-webhook=false), so a conversion webhook
			// (v1alpha1 <-> v1beta1) would have no server: the API
			// server's watch cache then fails on any object asked for in
			// the other version, and after a restart on re-listing.
			// Conversion None (apiVersion rewritten) is enough for the
			// tests, which use v1beta1 only.
			if st, _, _ := unstructured.NestedString(o.Object, "spec", "conversion", "strategy"); st == "Webhook" {
				if err := unstructured.SetNestedMap(o.Object, map[string]any{"strategy": "None"}, "spec", "conversion"); err != nil {
					return err
				}
			}
			if _, err := dyn.Resource(crdGVR).Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: fieldManager}); err != nil {
				return fmt.Errorf("kubetest: install CRD %s from %s: %w", o.GetName(), f, err)
			}
			crds = append(crds, o)
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config())
	if err != nil {
		return err
	}
	for _, crd := range crds {
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		err := poll(ctx, func() (bool, error) {
			got, err := dyn.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, cnd := range conds {
				if m, ok := cnd.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("kubetest: CRD %s not established: %w", crd.GetName(), err)
		}
		for _, v := range versions {
			m, _ := v.(map[string]any)
			if served, _ := m["served"].(bool); !served {
				continue
			}
			gv := group + "/" + fmt.Sprint(m["name"])
			err := poll(ctx, func() (bool, error) {
				list, err := dc.ServerResourcesForGroupVersion(gv)
				if err != nil {
					return false, nil // not yet in discovery
				}
				for _, r := range list.APIResources {
					if r.Name == plural {
						return true, nil
					}
				}
				return false, nil
			})
			if err != nil {
				return fmt.Errorf("kubetest: %s of %s not in discovery: %w", plural, gv, err)
			}
		}
	}
	return nil
}

// PrepareNamespace creates namespace ns (if missing) with what a
// controller-manager would put there: the default ServiceAccount and the
// kube-root-ca.crt ConfigMap. WithServices the controller-manager runs:
// it creates the namespace and waits for the controllers to make both.
func (c *Cluster) PrepareNamespace(ctx context.Context, ns string) error {
	dyn, err := c.Dynamic()
	if err != nil {
		return err
	}
	if c.opts.services {
		return c.awaitNamespace(ctx, ns)
	}
	objs := []struct {
		gvr schema.GroupVersionResource
		obj map[string]any
	}{
		{nsGVR, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}},
		{saGVR, map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "default", "namespace": ns}}},
		{cmGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "kube-root-ca.crt", "namespace": ns},
			"data": map[string]any{"ca.crt": string(c.pki.caPEM)}}},
	}
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: o.obj}
		r := dyn.Resource(o.gvr).Namespace(u.GetNamespace())
		if u.GetNamespace() == "" {
			_, err = dyn.Resource(o.gvr).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: fieldManager})
		} else {
			_, err = r.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: fieldManager})
		}
		if err != nil {
			return fmt.Errorf("kubetest: create %s %s in namespace %q: %w", u.GetKind(), u.GetName(), ns, err)
		}
	}
	return nil
}

// readObjects decodes every document of a YAML file.
func readObjects(file string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("kubetest: %s: %w", filepath.Base(file), err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// poll calls ok every 100ms until it says true, fails with an error other
// than NotFound, or ctx ends.
func poll(ctx context.Context, ok func() (bool, error)) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		done, err := ok()
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// awaitNamespace creates namespace ns (if missing) and waits until
// kube-controller-manager has made its default ServiceAccount and its
// kube-root-ca.crt ConfigMap.
func (c *Cluster) awaitNamespace(ctx context.Context, ns string) error {
	dyn, err := c.Dynamic()
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	if _, err := dyn.Resource(nsGVR).Apply(ctx, ns, u, metav1.ApplyOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("kubetest: create namespace %q: %w", ns, err)
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	for _, o := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{{saGVR, "default"}, {cmGVR, "kube-root-ca.crt"}} {
		err := poll(ctx, func() (bool, error) {
			_, err := dyn.Resource(o.gvr).Namespace(ns).Get(ctx, o.name, metav1.GetOptions{})
			return err == nil, err
		})
		if err != nil {
			return fmt.Errorf("kubetest: kube-controller-manager made no %s %s in namespace %q: %w", o.gvr.Resource, o.name, ns, err)
		}
	}
	return nil
}
