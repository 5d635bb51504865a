package argocd_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/slipway-dev/slipway/pkg/cluster/argocd"
	"github.com/slipway-dev/slipway/testharness/kubetest"
)

// Argo CD's Application CRD, read from its module (never copied here).
const argoCDModule, argoCDVersion = "github.com/argoproj/argo-cd/v2", "v2.14.21"

// An Application as the rollout's applier, against a real API server with
// Argo CD's own Application CRD: the example Application of
// integrations/argocd is stored; Sync answers the synced revision only
// while Argo CD reports Synced and Healthy, and otherwise ErrNotYet with
// what it reports; a multi-source or missing Application is an error.
func TestApplicationSync(t *testing.T) {
	c := kubetest.New(t)
	ctx := context.Background()
	dir, err := kubetest.ModuleDir(ctx, argoCDModule, argoCDVersion)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.InstallCRDs(ctx, filepath.Join(dir, "manifests", "crds", "application-crd.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := c.PrepareNamespace(ctx, "argocd"); err != nil {
		t.Fatal(err)
	}
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "integrations", "argocd", "examples", "application.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &obj.Object); err != nil {
		t.Fatal(err)
	}
	apps := dyn.Resource(argocd.ApplicationResource).Namespace("argocd")
	if _, err := apps.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the example Application: %v", err)
	}
	app, err := argocd.NewApplication(dyn, "argocd", "pool-agents")
	if err != nil {
		t.Fatal(err)
	}
	rev := strings.Repeat("c0", 20)
	// setStatus writes status as Argo CD's controller does (the CRD has no
	// status subresource).
	setStatus := func(status string) {
		t.Helper()
		got, err := apps.Get(ctx, "pool-agents", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var st map[string]any
		if err := yaml.Unmarshal([]byte(status), &st); err != nil {
			t.Fatal(err)
		}
		got.Object["status"] = st
		if _, err := apps.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	notYet := func(want string) {
		t.Helper()
		if got, err := app.Sync(ctx); !errors.Is(err, argocd.ErrNotYet) || got != "" || !strings.Contains(err.Error(), want) {
			t.Fatalf("Sync: %q %v, want ErrNotYet with %q", got, err, want)
		}
	}

	notYet("argocd/pool-agents: not synced and healthy yet: sync (none), health (none), revision (none)")
	setStatus("sync: {status: OutOfSync, revision: " + rev + "}\nhealth: {status: Progressing}\noperationState: {phase: Running, message: waiting for healthy state of extensions.agents.x-k8s.io/SandboxWarmPool/agents-1, startedAt: '2026-11-01T00:00:00Z', operation: {sync: {revision: " + rev + "}}}\n")
	notYet("sync OutOfSync, health Progressing, revision " + rev + ", operation Running: waiting for healthy state of extensions.agents.x-k8s.io/SandboxWarmPool/agents-1")
	setStatus("sync: {status: Synced, revision: " + rev + "}\nhealth: {status: Degraded, message: warm pool not ready}\n")
	notYet("sync Synced, health Degraded, revision " + rev + ", health message: warm pool not ready")
	setStatus("sync: {status: Synced, revision: " + rev + "}\nhealth: {status: Healthy}\n")
	if got, err := app.Sync(ctx); err != nil || got != rev {
		t.Fatalf("Synced and Healthy: %q %v, want %s", got, err, rev)
	}
	setStatus("sync: {status: Synced, revisions: [" + rev + ", " + rev + "]}\nhealth: {status: Healthy}\n")
	if _, err := app.Sync(ctx); err == nil || errors.Is(err, argocd.ErrNotYet) || !strings.Contains(err.Error(), "has 2 sources") {
		t.Fatalf("multi-source: %v", err)
	}

	gone, err := argocd.NewApplication(dyn, "argocd", "pool-gone")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gone.Sync(ctx); err == nil || errors.Is(err, argocd.ErrNotYet) || !strings.Contains(err.Error(), `argocd/pool-gone: applications.argoproj.io "pool-gone" not found`) {
		t.Fatalf("missing Application: %v", err)
	}
	if _, err := argocd.NewApplication(dyn, "argocd", "Pool_Agents"); err == nil || !strings.Contains(err.Error(), `application name "Pool_Agents"`) {
		t.Fatalf("bad name: %v", err)
	}
}
