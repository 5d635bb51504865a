package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/cluster/kubefleet"
	"github.com/slipway-dev/slipway/testharness/kubetest"
	"github.com/slipway-dev/slipway/testharness/pgtest"
)

// kubeNamespace is the sandboxes' namespace: the in-cluster runtime's
// (--namespace, where its Role grants it SandboxClaims), made by the
// install, named by the pool's kustomization.yaml.
const kubeNamespace = "slipway-sandboxes"

// kubeProofs are the proofs the demo's pool runs: all but network, since
// the single node's CNI bridge enforces no NetworkPolicy (the render's
// policy is validated by the API server, not enforced here).
var kubeProofs = []string{"allocate", "identity", "template-tests", "workspace-writable", "cleanup"}

// runKube is the Kubernetes part of the demo (make demo-kube): a real
// single-node cluster that routes Services, with agent-sandbox's
// controller; the two sample templates built and signed; Slipway's
// snapshot release pushed and installed into the node (overlays/single:
// the control plane and the runtime, on the host's PostgreSQL, config.git
// served over HTTP); generations g1 (agent-tools) and g2 (minimal)
// promoted; the pool rendered, applied and waited for; a claim through the
// in-cluster runtime's Service, a rollout to g2 with its proofs run
// through it, and a claim that gets g2; then the control plane's Service
// answers (a job, its trace), the cleanup list and cost.
func runKube(ctx context.Context, keep bool) (err error) {
	began := time.Now()
	if skip := kubeSkip(); skip != nil {
		printKubeSkip(skip)
		return nil
	}
	d, err := newDemo(keep)
	if err != nil {
		return err
	}
	defer d.close()
	sh, work := d.sh, d.work
	repoRoot := filepath.Dir(filepath.Dir(d.here))
	t0 := time.Now()
	c, nodeName, err := startCluster(ctx, d)
	if err != nil {
		return err
	}
	clusterUp := time.Since(t0)
	fmt.Printf("  API server %s, node %s Ready, controller ready in %s; kubeconfig: cluster/kubeconfig\n", c.Host(), nodeName, clusterUp.Round(100*time.Millisecond))
	host := d.host
	if _, err := prepare(ctx, sh, work, host, repoRoot); err != nil {
		return err
	}
	minimal, _, err := buildTemplate(sh, host, "minimal")
	if err != nil {
		return err
	}
	agentTools, _, err := buildTemplate(sh, host, "agent-tools")
	if err != nil {
		return err
	}
	rel, images, err := publishRelease(ctx, d, repoRoot)
	if err != nil {
		return err
	}
	g1, g2, err := kubeGenerations(sh, work, images, agentTools, minimal)
	if err != nil {
		return err
	}
	built := time.Since(began)
	t0 = time.Now()
	pl, err := install(ctx, d, c, rel, images)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil { // what the planes said, for the failure
			fmt.Print(planesLogs(ctx, c))
		}
	}()
	installed := time.Since(t0)
	dyn, err := c.Dynamic()
	if err != nil {
		return err
	}
	if err := clusterObjects(ctx, dyn); err != nil {
		return err
	}

	kc := filepath.Join("cluster", "kubeconfig")
	section("render", "g1's SandboxTemplate and SandboxWarmPool from pools/agents/kustomization.yaml (kustomize's API), verified first")
	if err := sh.run(0, "render", "--repo", "config.git", "--pool", "agents"); err != nil {
		return err
	}
	section("apply", "server-side apply (field manager slipway) into %s, an inventory, then wait for the warm pool's readyReplicas", kubeNamespace)
	t0 = time.Now()
	if err := sh.run(0, "apply", "--repo", "config.git", "--pool", "agents", "--kubeconfig", kc, "--wait", "--timeout", "3m"); err != nil {
		return err
	}
	warmUp := time.Since(t0)
	if err := showPool(ctx, dyn); err != nil {
		return err
	}

	rt := &runtimeProc{server: pl.runtime, token: pl.tokenFile, stop: func() {}}
	section("claim", "through the in-cluster runtime's Service: a warm member of g1, a command in its pod (the agent's tools on PATH), released")
	first, err := waitClaim(rt, sh, g1, "sh", "-c", "echo hello from pod $(hostname) as uid $(id -u) in $(pwd); agent-lint --version && agent-run echo tools from $AGENT_CACHE")
	if err != nil {
		return err
	}
	section("runs show", "the run manifest, read from the runtime's Service: cluster, namespace, node, launch type, and served_by: the release's images")
	if err := sh.run(0, "runs", "show", first.RunID, "--runtime", rt.server, "--token-file", rt.token); err != nil {
		return err
	}

	t0 = time.Now()
	longRun, err := kubeRollout(ctx, sh, rt, kc, g1, g2)
	if err != nil {
		return err
	}
	rolled := time.Since(t0)
	section("rollout status", "succeeded: g2 active, g1 retained (its template kept, its warm pool gone), evidence per check")
	if err := sh.run(0, "rollout", "status", "--repo", "config.git", "--pool", "agents"); err != nil {
		return err
	}
	if err := showPool(ctx, dyn); err != nil {
		return err
	}
	if err := runtimeSync(ctx, d, rt); err != nil {
		return err
	}
	section("claim", "a new claim gets g2, the minimal template (the in-cluster runtime reads config.git every 2 s)")
	second, err := waitClaim(rt, sh, g2, "sh", "-c", "/opt/tools/greet.sh; echo generation $SLIPWAY_GENERATION")
	if err != nil {
		return err
	}

	if err := kubeAnswers(ctx, sh, work, d.here, dyn, pl, g2); err != nil {
		return err
	}

	section("summary", "Slipway on Kubernetes, installed into this machine's node")
	fmt.Printf("  templates  minimal %s, agent-tools %s: built, signed, attested; release pushed (%s)\n", short(minimal), short(agentTools), built.Round(time.Second))
	fmt.Printf("  cluster    etcd, kube-apiserver, kube-controller-manager, kubelet, kube-proxy, containerd, agent-sandbox's controller up in %s\n", clusterUp.Round(100*time.Millisecond))
	fmt.Printf("  install    overlays/single from the release (slipway@%s): control plane and runtime Ready in %s\n", short(images["slipway"]), installed.Round(100*time.Millisecond))
	fmt.Printf("  g1         %s: rendered, applied, 2 warm members ready in %s\n", g1, warmUp.Round(100*time.Millisecond))
	fmt.Printf("  claim      run %s on a warm member of g1 through the in-cluster runtime\n", first.RunID)
	fmt.Printf("  g2         %s: rolled out on the cluster in %s (the drain waited for the long task), %d proofs passed through the in-cluster runtime\n", g2, rolled.Round(100*time.Millisecond), len(kubeProofs))
	fmt.Printf("  drain      long task %s stayed on g1 until it ended; claim %s got g2\n", longRun.RunID, second.RunID)
	fmt.Printf("  answers    job through the in-cluster control plane and its trace, cleanup list (a leaked claim cleaned), cost from the cluster's timestamps\n")
	fmt.Printf("  wall time  %s\n", time.Since(began).Round(time.Second))
	fmt.Println("\ndemo-kube: ok")
	return nil
}

// kubeSkip says why the Kubernetes part cannot run here (nil when it can).
func kubeSkip() error {
	if err := kubetest.CheckNodeCluster(kubeParts...); err != nil {
		return err
	}
	_, err := pgtest.BinDir()
	return err
}

// printKubeSkip says what the Kubernetes part needs and why it is skipped.
func printKubeSkip(err error) {
	cache, _ := kubetest.CacheDir()
	fmt.Printf(`demo-kube: skipped: %v

The Kubernetes part of the demo runs a real single-node cluster on this machine and installs
Slipway into it. It needs:
  - the cluster's binaries, built once from the Go module proxy into %s
    by `+"`make kube-bins`"+` (kube-apiserver, kube-controller-manager, kubelet, kube-proxy,
    kube-scheduler %s, agent-sandbox's controller %s, the pause binary; about 30 minutes cold on 2 cores);
  - Debian's etcd-server, containerd, runc, iptables, containernetworking-plugins and
    postgresql (`+"`make deps`"+`);
  - root on Linux (a node runs containerd, kubelet and a network bridge).
examples/kubernetes/README.md walks through the same install on a cluster of your own.
`, err, cache, kubetest.KubeVersion, kubetest.AgentSandboxVersion)
}

// kubeGenerations seeds the config repository, sets the pool's proofs,
// and creates g1 (the agent-tools template, runtime class runc; promoted
// active) and g2 (the minimal template, the rest copied from g1).
func kubeGenerations(sh shell, work string, images map[string]string, agentTools, minimal string) (g1, g2 string, err error) {
	policy := filepath.Join("policies", "verification.yaml")
	section("config init", "a bare config repository for pool agents, with the verification policy and its key")
	if err := sh.run(0, "config", "init", "config.git", "--pool", "agents", "--policy", policy); err != nil {
		return "", "", err
	}
	section("pool namespace", "the pool's objects in %s, the in-cluster runtime's namespace (git push, as a reviewed change lands)", kubeNamespace)
	if err := commitConfig(work, "", "pool agents in "+kubeNamespace, map[string]string{
		"pools/agents/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + kubeNamespace + "\nimages: []\n",
	}); err != nil {
		return "", "", err
	}
	section("pool set", "the proofs this node can run: all but network (its CNI bridge enforces no NetworkPolicy)")
	if err := sh.run(0, "pool", "set", "--repo", "config.git", "--pool", "agents", "proofs="+strings.Join(kubeProofs, ",")); err != nil {
		return "", "", err
	}
	base := []string{"generation", "create", "--pool", "agents", "--policy", policy}
	section("generation create", "g1: the release's control plane and runner (the planes installed), agent-tools template, runtime class runc; every image verified")
	b, err := sh.capture(append(base, "--out-file", "g1.yaml",
		"--pin", "controlPlane="+images["slipway"],
		"--pin", "runner="+images["slipway-runner"],
		"--pin", "workspaceTemplate="+agentTools,
		"--pin", "runtimeClass=runc",
		"--control-plane-protocol", "1-2", "--runner-protocol", "1")...)
	if err != nil {
		return "", "", err
	}
	g1 = strings.TrimSpace(string(b))
	fmt.Printf("  %s\n", g1)
	section("promote", "g1 into the config repository, active at once (the pool's first generation)")
	if err := sh.run(0, "promote", "--repo", "config.git", "--pool", "agents", "--generation", "g1.yaml", "--activate"); err != nil {
		return "", "", err
	}
	section("generation create", "g2: the minimal template instead; every other pin copied from g1")
	if b, err = sh.capture(append(base, "--out-file", "g2.yaml", "--from", "g1.yaml", "--pin", "workspaceTemplate="+minimal)...); err != nil {
		return "", "", err
	}
	g2 = strings.TrimSpace(string(b))
	fmt.Printf("  %s\n", g2)
	return g1, g2, nil
}

var (
	runtimeClasses = schema.GroupVersionResource{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses"}
	pods           = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// clusterObjects makes what a cluster's operator provides beside Slipway:
// the RuntimeClass g1 pins.
func clusterObjects(ctx context.Context, dyn dynamic.Interface) error {
	section("cluster objects", "what the operator provides: the RuntimeClass the generations pin (runc here; gVisor's runsc on a real cluster)")
	rc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": map[string]any{"name": "runc"}, "handler": "runc"}}
	if _, err := dyn.Resource(runtimeClasses).Apply(ctx, "runc", rc, metav1.ApplyOptions{FieldManager: "operator"}); err != nil {
		return fmt.Errorf("apply RuntimeClass runc: %w", err)
	}
	fmt.Println("  runtimeclass/runc applied (handler runc)")
	return nil
}

// showPool lists the pool's SandboxTemplates and SandboxWarmPools (with
// their generation and ready members) and its pods, as kubectl would.
func showPool(ctx context.Context, dyn dynamic.Interface) error {
	fmt.Printf("$ kubectl get sandboxtemplates,sandboxwarmpools -l %s=agents\n", kubeobjects.LabelPool)
	fmt.Printf("  %-46s %-20s %s\n", "NAME", "GENERATION", "READY")
	for _, gvr := range []schema.GroupVersionResource{kubefleet.SandboxTemplates, kubefleet.SandboxWarmPools} {
		l, err := dyn.Resource(gvr).Namespace(kubeNamespace).List(ctx, metav1.ListOptions{LabelSelector: kubeobjects.LabelPool + "=agents"})
		if err != nil {
			return err
		}
		sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].GetName() < l.Items[j].GetName() })
		for _, u := range l.Items {
			ready := "-"
			if gvr == kubefleet.SandboxWarmPools {
				want, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
				got, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
				ready = fmt.Sprintf("%d/%d", got, want)
			}
			fmt.Printf("  %-46s %-20s %s\n", strings.TrimSuffix(gvr.Resource, "s")+"/"+u.GetName(), trim(u.GetLabels()[kubeobjects.LabelGeneration], 20), ready)
		}
	}
	return showPods(ctx, dyn)
}

func trim(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// showPods lists the pool's pods as `kubectl get pods` would, with the
// generation each belongs to.
func showPods(ctx context.Context, dyn dynamic.Interface) error {
	l, err := dyn.Resource(pods).Namespace(kubeNamespace).List(ctx, metav1.ListOptions{LabelSelector: kubeobjects.LabelPool + "=agents"})
	if err != nil {
		return err
	}
	fmt.Printf("$ kubectl get pods -l %s=agents\n", kubeobjects.LabelPool)
	rows := []string{fmt.Sprintf("  %-28s %-10s %-20s %s", "NAME", "PHASE", "GENERATION", "NODE")}
	var body []string
	for _, p := range l.Items {
		if p.GetDeletionTimestamp() != nil {
			continue
		}
		phase, _, _ := unstructured.NestedString(p.Object, "status", "phase")
		node, _, _ := unstructured.NestedString(p.Object, "spec", "nodeName")
		body = append(body, fmt.Sprintf("  %-28s %-10s %-20s %s", p.GetName(), phase, trim(p.GetLabels()[kubeobjects.LabelGeneration], 20), node))
	}
	sort.Strings(body)
	fmt.Println(strings.Join(append(rows, body...), "\n"))
	return nil
}

// waitClaim claims until the runtime grants generation want (it follows
// the config repository every 500 ms), at most 30 s.
func waitClaim(rt *runtimeProc, sh shell, want string, command ...string) (*claimResult, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := rt.claim(sh, true, command...)
		if err == nil && res.Generation == want {
			fmt.Printf("$ slipway claim --runtime %s --token-file %s --pool agents --tenant demo -- %s\n", rt.server, rt.token, strings.Join(command, " "))
			fmt.Printf("  run %s in sandbox %s, generation %s, warm %v, exit %d\n", res.RunID, res.SandboxID, res.Generation, res.Warm, res.ExitCode)
			for _, l := range strings.Split(strings.TrimSpace(res.Output), "\n") {
				fmt.Printf("  > %s\n", l)
			}
			return res, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("granted %s", res.Generation)
			}
			return nil, fmt.Errorf("no claim on %s within 30s: %v", want, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
