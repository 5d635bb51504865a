package serve_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/pkg/kubeaccess"
	"github.com/slipway-dev/slipway/testharness/kubetest"
)

// rules are RBAC rules granting perms, namespaced ones and cluster-wide ones
// apart.
func rules(perms []kubeaccess.Permission) (namespaced, cluster []rbacv1.PolicyRule) {
	for _, p := range perms {
		res := p.Resource
		if p.Subresource != "" {
			res += "/" + p.Subresource
		}
		r := rbacv1.PolicyRule{APIGroups: []string{p.Group}, Resources: []string{res}, Verbs: []string{p.Verb}}
		if p.Namespace == "" {
			cluster = append(cluster, r)
		} else {
			namespaced = append(namespaced, r)
		}
	}
	return namespaced, cluster
}

// serviceAccountKubeconfig creates ServiceAccount name in ns and writes a
// kubeconfig holding a token of it (the TokenRequest API).
func serviceAccountKubeconfig(t *testing.T, c *kubetest.Cluster, admin kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: c.Host(), CertificateAuthorityData: c.Config().CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: name, Namespace: ns}
	kc.CurrentContext = "kubetest"
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, file); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestServeOnKubeNamesAMissingVerb: a runtime whose ServiceAccount's Role
// lacks one verb its Kubernetes backend uses (delete pods) starts, says so
// in its log naming the verb, resource and namespace, and GET /readyz
// answers 503 with the same; once the Role grants it, /readyz turns 200
// without a restart. Against a real API server with RBAC on.
func TestServeOnKubeNamesAMissingVerb(t *testing.T) {
	c := kubetest.New(t)
	ctx := context.Background()
	const ns = "verbs"
	if err := c.PrepareNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	admin, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	all := kubesandbox.Permissions(ns)
	lacking := kubeaccess.Permission{Resource: "pods", Verb: "delete", Namespace: ns}
	if !slices.Contains(all, lacking) {
		t.Fatalf("the backend no longer deletes pods: pick another verb for this test (%v)", all)
	}
	nsRules, clusterRules := rules(slices.DeleteFunc(slices.Clone(all), func(p kubeaccess.Permission) bool { return p == lacking }))
	role, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "runtime"}, Rules: nsRules}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sub := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "runtime", Namespace: ns}}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "runtime"},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "runtime"}, Subjects: sub}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "runtime-nodes"}, Rules: clusterRules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "runtime-nodes"},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "runtime-nodes"}, Subjects: sub}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := serviceAccountKubeconfig(t, c, admin, ns, "runtime")

	repo := configRepo(ctx, t)
	rt := startServed(ctx, t, serve.Config{Backend: serve.BackendKubernetes, Kubeconfig: kubeconfig, Namespace: ns,
		Repo: repo, State: t.TempDir(), Verify: runtime.Verify{Skip: true},
		SyncInterval: 300 * time.Millisecond, ReconcileInterval: time.Second, StorageEvery: time.Hour})
	addr, log := rt.addr, rt.log
	readyz := func() (int, runtimeapi.Readiness) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var r runtimeapi.Readiness
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("/readyz: %v: %s", err, b)
		}
		return resp.StatusCode, r
	}
	want := "may not delete pods in namespace " + ns
	code, r := readyz()
	if code != http.StatusServiceUnavailable || r.Ready || len(r.Failing) == 0 {
		t.Fatalf("/readyz with a verb missing: %d %+v", code, r)
	}
	var part *runtimeapi.ReadyPart
	for i := range r.Failing {
		if r.Failing[i].Part == "permissions" {
			part = &r.Failing[i]
		}
	}
	if part == nil || !strings.Contains(part.Reason, want) || strings.Count(part.Reason, "may not") != 1 {
		t.Errorf("/readyz: %+v, want the part permissions naming %q alone", r.Failing, want)
	}
	if n := strings.Count(log.String(), want); n != 1 {
		t.Errorf("the log names the missing verb %d times, want once:\n%s", n, log.String())
	}

	// The Role is fixed while the runtime runs: ready without a restart.
	role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete"}})
	if _, err := admin.RbacV1().Roles(ns).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, r = readyz()
		if code == http.StatusOK && r.Ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz once the Role grants every verb: %d %+v\n%s", code, r, log.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !strings.Contains(log.String(), "every verb it uses is granted") {
		t.Errorf("the log does not say the verbs are granted now:\n%s", log.String())
	}
	rt.stop(t)
}
