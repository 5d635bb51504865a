package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/pkg/release"
	"github.com/slipway-dev/slipway/testharness/kubetest"
)

// leaderLease is the Lease duration of TestRuntimeLeaderElection: short, so
// that the takeover is quick; the bound checked is this plus 5 s.
const leaderLease = 6 * time.Second

var (
	leadsLine = regexp.MustCompile(`(?m)^leader: (\S+) leads \(Lease [^)]*\)$`)
	waitsLine = regexp.MustCompile(`(?m)^leader: \S+ leads \(Lease [^)]*\); (\S+) waits$`)
)

// plantGhostClaim writes, as agent-sandbox's controller would leave them, a
// Ready SandboxClaim of a run no runtime recorded (owner run) bound to its
// Sandbox: the reconciler deletes it (no live lease) after its grace.
func plantGhostClaim(t *testing.T, dyn dynamic.Interface, ns, run string) string {
	t.Helper()
	ctx := context.Background()
	claims := schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	sandboxes := schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	const gen = "g-3333333333333333333333333333333333333333333333333333333333333333"
	labels := map[string]any{kubesandbox.LabelClaim: "true", kubeobjects.LabelPool: "agents", kubeobjects.LabelGeneration: kubeobjects.GenerationLabel(gen)}
	name := kubesandbox.ClaimName(run)
	cl, err := dyn.Resource(claims).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kubeobjects.ExtensionsAPIVersion, "kind": "SandboxClaim",
		"metadata": map[string]any{"name": name, "labels": labels,
			"annotations": map[string]any{kubesandbox.AnnotationOwner: run, kubeobjects.AnnotationGenerationID: gen}},
		"spec": map[string]any{"warmPoolRef": map[string]any{"name": kubeobjects.ObjectName("agents", gen)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sb := "sb-" + run
	if _, err := dyn.Resource(sandboxes).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
		"metadata": map[string]any{"name": sb, "labels": map[string]any{kubeobjects.LabelPool: "agents"},
			"ownerReferences": []any{map[string]any{"apiVersion": cl.GetAPIVersion(), "kind": cl.GetKind(), "name": cl.GetName(), "uid": string(cl.GetUID()), "controller": true}}},
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "workspace", "image": "busybox"}}}}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cl.Object["status"] = map[string]any{"sandbox": map[string]any{"name": sb},
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "message": "bound", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
	if _, err := dyn.Resource(claims).Namespace(ns).UpdateStatus(ctx, cl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return "SandboxClaim/" + name
}

// swept says whether p's cleanup records hold resource as done.
func (p *runtimeProc) swept(t *testing.T, resource string) bool {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, p.base+"/v1/cleanup", nil)
	req.Header.Set("Authorization", "Bearer "+restartToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v reconcile.Remaining
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	for _, r := range v.Recent {
		if r.Resource == resource && r.State == reconcile.StateDone {
			return true
		}
	}
	return false
}

// TestRuntimeLeaderElection: two `runtime serve --backend kubernetes
// --leader-elect` processes against one real API server. The first takes
// the Lease and sweeps (a ghost claim is deleted by it, and the other's
// records hold nothing); the second waits. The leader is killed (SIGKILL:
// its Lease is not given up) and the other leads within the lease duration
// plus 5 s, sweeps the next ghost claim, and holds the Lease.
func TestRuntimeLeaderElection(t *testing.T) {
	c := kubetest.New(t)
	ctx := context.Background()
	const ns = "leader"
	if err := c.PrepareNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	repo := filepath.Join(dir, "config.git")
	if err := gitops.InitBare(repo, "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := release.InitConfig(ctx, repo, "main", "agents", nil, gitops.Signature{}); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(restartToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--backend", "kubernetes", "--kubeconfig", c.Kubeconfig(), "--namespace", ns, "--leader-elect",
		"--leader-election-lease-duration", leaderLease.String(), "--reconcile-interval", "500ms", "--storage-sample-interval", "1s", "--log-format", "text"}
	a := startRuntimeArgs(t, repo, filepath.Join(dir, "a"), tokenFile, args...)
	var aID string
	poll(t, 60*time.Second, "the first runtime leads", func() (bool, string) {
		if m := leadsLine.FindStringSubmatch(a.text()); m != nil {
			aID = m[1]
			return true, ""
		}
		return false, a.text()
	})
	b := startRuntimeArgs(t, repo, filepath.Join(dir, "b"), tokenFile, args...)
	var bID string
	poll(t, 60*time.Second, "the second runtime waits", func() (bool, string) {
		if m := waitsLine.FindStringSubmatch(b.text()); m != nil {
			bID = m[1]
			return true, ""
		}
		return false, b.text()
	})
	if aID == bID || !strings.Contains(b.text(), "leader: "+aID+" leads") {
		t.Fatalf("the second runtime (%s) does not see the first (%s) lead:\n%s", bID, aID, b.text())
	}

	// Only the leader sweeps.
	ghost1 := plantGhostClaim(t, dyn, ns, "r-ghost-1")
	poll(t, reconcile.DefaultGrace+60*time.Second, "the leader sweeps "+ghost1, func() (bool, string) { return a.swept(t, ghost1), "" })
	if b.swept(t, ghost1) {
		t.Errorf("the waiting runtime swept %s too", ghost1)
	}
	if leadsLine.MatchString(b.text()) {
		t.Errorf("the second runtime leads while the first holds the Lease:\n%s", b.text())
	}

	// The leader dies without giving the Lease up.
	killed := time.Now()
	if err := a.stop(t, syscall.SIGKILL, 30*time.Second); err == nil {
		t.Fatal("the killed runtime exited cleanly")
	}
	poll(t, leaderLease+30*time.Second, "the second runtime leads", func() (bool, string) { return leadsLine.MatchString(b.text()), "" })
	took := time.Since(killed)
	t.Logf("takeover %v after the kill (lease %v)", took.Round(time.Millisecond), leaderLease)
	if took > leaderLease+5*time.Second {
		t.Errorf("the second runtime led %v after the leader was killed, want within the lease (%v) plus 5 s", took, leaderLease)
	}
	if m := leadsLine.FindStringSubmatch(b.text()); m == nil || m[1] != bID {
		t.Errorf("the leads line names %v, want %s", m, bID)
	}
	k, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	lease, err := k.CoordinationV1().Leases(ns).Get(ctx, "slipway-runtime", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != bID {
		t.Errorf("the Lease is held by %v, want %s", lease.Spec.HolderIdentity, bID)
	}
	ghost2 := plantGhostClaim(t, dyn, ns, "r-ghost-2")
	poll(t, reconcile.DefaultGrace+60*time.Second, "the new leader sweeps "+ghost2, func() (bool, string) { return b.swept(t, ghost2), "" })

	// A clean stop gives the Lease up (after its work returned).
	if err := b.stop(t, syscall.SIGTERM, 60*time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, b.text())
	}
	lease, err = k.CoordinationV1().Leases(ns).Get(ctx, "slipway-runtime", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("after a clean stop the Lease is still held by %s", *h)
	}
}
