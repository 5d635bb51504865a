package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/leader"
	"github.com/slipway-dev/slipway/pkg/kubeaccess"
	"github.com/slipway-dev/slipway/testharness/kubetest"
)

const (
	systemNS   = "slipway-system"
	sandboxNS  = "slipway-sandboxes"
	runtimeSA  = "slipway-runtime"
	leaderRole = "slipway-runtime-leader"
)

// wantPermissions is what the runtime uses, from the code: the backend's
// verbs in the sandboxes' namespace, the Lease's in its own.
func wantPermissions() []kubeaccess.Permission {
	return append(kubesandbox.Permissions(sandboxNS), leader.Permissions(systemNS)...)
}

// granted expands rules (of a Role in ns, or a ClusterRole when ns is "")
// into the permissions they grant; a wildcard is refused.
func granted(t testing.TB, ns string, rules []rbacv1.PolicyRule) []kubeaccess.Permission {
	t.Helper()
	var out []kubeaccess.Permission
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if g == "*" || res == "*" || v == "*" || len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
						t.Errorf("rule %+v: wildcards, resource names and URLs are not the runtime's", r)
					}
					name, sub, _ := strings.Cut(res, "/")
					out = append(out, kubeaccess.Permission{Group: g, Resource: name, Subresource: sub, Verb: v, Namespace: ns})
				}
			}
		}
	}
	return out
}

func sorted(ps []kubeaccess.Permission) []string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	slices.Sort(s)
	return s
}

// The runtime's Roles and ClusterRole grant exactly the verbs the code
// uses (kubesandbox.Permissions, leader.Permissions), each bound to the
// runtime's ServiceAccount; the control plane's ServiceAccount has no
// binding and mounts no token.
func TestRoleIsWhatTheCodeUses(t *testing.T) {
	for name := range overlays {
		rm := build(t, name)
		var have []kubeaccess.Permission
		for n, r := range objects[rbacv1.Role](t, rm, "Role") {
			if n != runtimeSA && n != leaderRole {
				t.Errorf("%s: unexpected Role %s", name, n)
			}
			have = append(have, granted(t, r.Namespace, r.Rules)...)
		}
		for _, r := range objects[rbacv1.ClusterRole](t, rm, "ClusterRole") {
			have = append(have, granted(t, "", r.Rules)...)
		}
		if got, want := sorted(have), sorted(wantPermissions()); !slices.Equal(got, want) {
			t.Errorf("%s: the Roles grant\n  %s\nthe code uses\n  %s", name, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		bindings := map[string][]rbacv1.Subject{}
		for _, b := range objects[rbacv1.RoleBinding](t, rm, "RoleBinding") {
			bindings["Role/"+b.RoleRef.Name+"@"+b.Namespace] = b.Subjects
		}
		for _, b := range objects[rbacv1.ClusterRoleBinding](t, rm, "ClusterRoleBinding") {
			bindings["ClusterRole/"+b.RoleRef.Name] = b.Subjects
		}
		want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: runtimeSA, Namespace: systemNS}}
		for _, k := range []string{"Role/" + runtimeSA + "@" + sandboxNS, "Role/" + leaderRole + "@" + systemNS, "ClusterRole/slipway-runtime-nodes"} {
			if !slices.Equal(bindings[k], want) {
				t.Errorf("%s: %s is bound to %+v, want the runtime's ServiceAccount alone", name, k, bindings[k])
			}
		}
		if len(bindings) != 3 {
			t.Errorf("%s: bindings %v, want the runtime's three", name, bindings)
		}
	}
}

// kindResources maps the install's kinds to their API resources.
var kindResources = map[string]schema.GroupVersionResource{
	"Namespace":           {Version: "v1", Resource: "namespaces"},
	"ServiceAccount":      {Version: "v1", Resource: "serviceaccounts"},
	"ConfigMap":           {Version: "v1", Resource: "configmaps"},
	"Service":             {Version: "v1", Resource: "services"},
	"Deployment":          {Group: "apps", Version: "v1", Resource: "deployments"},
	"PodDisruptionBudget": {Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
	"Role":                {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":         {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"ClusterRole":         {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"ClusterRoleBinding":  {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
}

// The HA install applied to a real API server (RBAC on; no node: the
// Deployments are stored and validated, no pod runs), then, as the
// runtime's ServiceAccount (a token from the TokenRequest API): every verb
// the code uses is granted (SelfSubjectAccessReviews, as the runtime asks
// at start), the allowed calls work, and what the Role does not hold is
// refused with 403: other namespaces, creating Secrets, listing nodes,
// writing templates or warm pools, deleting the Lease.
func TestHARBACOnAPIServer(t *testing.T) {
	c := kubetest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	rm := build(t, "ha")
	// the Namespaces first, then the rest in the build's order
	for _, kind := range []string{"Namespace", ""} {
		for _, r := range rm.Resources() {
			if (kind == "Namespace") != (r.GetKind() == "Namespace") {
				continue
			}
			m, err := r.Map()
			if err != nil {
				t.Fatal(err)
			}
			gvr, ok := kindResources[r.GetKind()]
			if !ok {
				t.Fatalf("kind %s: not in kindResources", r.GetKind())
			}
			u := &unstructured.Unstructured{Object: m}
			var ri dynamic.ResourceInterface = dyn.Resource(gvr)
			if ns := u.GetNamespace(); ns != "" {
				ri = dyn.Resource(gvr).Namespace(ns)
			}
			if _, err := ri.Create(ctx, u, metav1.CreateOptions{FieldManager: "deploy-test"}); err != nil {
				t.Fatalf("create %s %s/%s: %v", r.GetKind(), u.GetNamespace(), u.GetName(), err)
			}
		}
	}

	admin, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(systemNS).CreateToken(ctx, runtimeSA, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of %s/%s: %v", systemNS, runtimeSA, err)
	}
	sa := &rest.Config{Host: c.Host(), BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: c.Config().CAData}}

	if err := kubeaccess.Check(ctx, sa, wantPermissions()); err != nil {
		t.Fatalf("the runtime's ServiceAccount, with the HA install's RBAC: %v", err)
	}
	// the check is not lenient: what the Roles do not grant is named
	extra := []kubeaccess.Permission{
		{Resource: "secrets", Verb: "create", Namespace: sandboxNS},
		{Resource: "secrets", Verb: "list", Namespace: systemNS},
		{Resource: "nodes", Verb: "list"},
		{Group: "extensions.agents.x-k8s.io", Resource: "sandboxtemplates", Verb: "create", Namespace: sandboxNS},
	}
	var missing *kubeaccess.Missing
	if err := kubeaccess.Check(ctx, sa, append(wantPermissions(), extra...)); !errors.As(err, &missing) || !slices.Equal(sorted(missing.Permissions), sorted(extra)) {
		t.Fatalf("check with verbs the Roles lack: %v, want exactly %v missing", err, sorted(extra))
	}

	// and the calls themselves
	sdyn, err := dynamic.NewForConfig(sa)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := kubernetes.NewForConfig(sa)
	if err != nil {
		t.Fatal(err)
	}
	claims := schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	templates := schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	claim := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
		"metadata": map[string]any{"name": "sw-r-1"}, "spec": map[string]any{"warmPoolRef": map[string]any{"name": "agents-g"}}}}
	allowed := []struct {
		what string
		do   func() error
	}{
		{"create a SandboxClaim", func() error {
			_, err := sdyn.Resource(claims).Namespace(sandboxNS).Create(ctx, claim, metav1.CreateOptions{})
			return err
		}},
		{"list SandboxClaims", func() error {
			_, err := sdyn.Resource(claims).Namespace(sandboxNS).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"delete the SandboxClaim", func() error {
			return sdyn.Resource(claims).Namespace(sandboxNS).Delete(ctx, "sw-r-1", metav1.DeleteOptions{})
		}},
		{"list pods", func() error { _, err := sk.CoreV1().Pods(sandboxNS).List(ctx, metav1.ListOptions{}); return err }},
		{"list run Secrets", func() error {
			_, err := sk.CoreV1().Secrets(sandboxNS).List(ctx, metav1.ListOptions{LabelSelector: kubesandbox.LabelRun})
			return err
		}},
		{"get a node (none: 404, not 403)", func() error {
			_, err := sk.CoreV1().Nodes().Get(ctx, "no-such-node", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}},
	}
	for _, a := range allowed {
		if err := a.do(); err != nil {
			t.Errorf("as the runtime: %s: %v", a.what, err)
		}
	}
	refused := []struct {
		what string
		do   func() error
	}{
		{"create a Secret", func() error {
			_, err := sk.CoreV1().Secrets(sandboxNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
			return err
		}},
		{"list Secrets in slipway-system", func() error { _, err := sk.CoreV1().Secrets(systemNS).List(ctx, metav1.ListOptions{}); return err }},
		{"list pods in default", func() error { _, err := sk.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); return err }},
		{"list nodes", func() error { _, err := sk.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); return err }},
		{"create a SandboxTemplate", func() error {
			tpl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
				"metadata": map[string]any{"name": "t"}, "spec": map[string]any{}}}
			_, err := sdyn.Resource(templates).Namespace(sandboxNS).Create(ctx, tpl, metav1.CreateOptions{})
			return err
		}},
		{"update a Deployment", func() error {
			d, err := admin.AppsV1().Deployments(systemNS).Get(ctx, runtimeSA, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("as the admin: %w", err)
			}
			_, err = sk.AppsV1().Deployments(systemNS).Update(ctx, d, metav1.UpdateOptions{})
			return err
		}},
		{"delete a Lease", func() error {
			return sk.CoordinationV1().Leases(systemNS).Delete(ctx, "slipway-runtime", metav1.DeleteOptions{})
		}},
	}
	for _, r := range refused {
		if err := r.do(); !apierrors.IsForbidden(err) {
			t.Errorf("as the runtime: %s: %v, want 403 Forbidden", r.what, err)
		}
	}
}
