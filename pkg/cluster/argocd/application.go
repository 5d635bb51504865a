package argocd

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
)

// ApplicationResource is Argo CD's Application (argoproj.io/v1alpha1),
// read through the dynamic client: nothing of Argo CD's Go code is needed.
var ApplicationResource = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}

// ErrNotYet is an Application that is not synced and healthy yet: ask
// again later.
var ErrNotYet = errors.New("not synced and healthy yet")

// Application is one Argo CD Application as a rollout's applier: Sync
// tells which config revision Argo CD has applied to the cluster.
type Application struct {
	client          dynamic.Interface
	namespace, name string
}

// NewApplication reads the Application name in namespace (Argo CD's own
// namespace, usually argocd) through client.
func NewApplication(client dynamic.Interface, namespace, name string) (*Application, error) {
	if client == nil {
		return nil, errors.New("argocd: application: no Kubernetes client")
	}
	for _, f := range [][2]string{{"namespace", namespace}, {"name", name}} {
		if errs := validation.IsDNS1123Subdomain(f[1]); len(errs) > 0 {
			return nil, fmt.Errorf("argocd: application %s %q: %v", f[0], f[1], errs[0])
		}
	}
	return &Application{client: client, namespace: namespace, name: name}, nil
}

// Sync returns the commit the Application has synced
// (status.sync.revision) when status.sync.status is Synced and
// status.health.status is Healthy. Otherwise the error wraps ErrNotYet and
// says what Argo CD reports (sync and health status, the revision, the
// running operation's phase and message); an Application that cannot be
// read, or a multi-source one (status.sync.revisions), is another error.
func (a *Application) Sync(ctx context.Context) (string, error) {
	u, err := a.client.Resource(ApplicationResource).Namespace(a.namespace).Get(ctx, a.name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("argocd: application %s/%s: %w", a.namespace, a.name, err)
	}
	str := func(path ...string) string {
		s, _, _ := unstructured.NestedString(u.Object, path...)
		return s
	}
	sync, health, rev := str("status", "sync", "status"), str("status", "health", "status"), str("status", "sync", "revision")
	if revs, _, _ := unstructured.NestedStringSlice(u.Object, "status", "sync", "revisions"); rev == "" && len(revs) > 0 {
		return "", fmt.Errorf("argocd: application %s/%s has %d sources (status.sync.revisions): use an Application with the config repository as its one source", a.namespace, a.name, len(revs))
	}
	if sync == "Synced" && health == "Healthy" && rev != "" {
		return rev, nil
	}
	msg := fmt.Sprintf("sync %s, health %s, revision %s", orNone(sync), orNone(health), orNone(rev))
	if phase := str("status", "operationState", "phase"); phase != "" {
		msg += fmt.Sprintf(", operation %s", phase)
		if m := str("status", "operationState", "message"); m != "" {
			msg += ": " + m
		}
	}
	if m := str("status", "health", "message"); m != "" {
		msg += ", health message: " + m
	}
	return "", fmt.Errorf("argocd: application %s/%s: %w: %s", a.namespace, a.name, ErrNotYet, msg)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
