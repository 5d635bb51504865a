//go:build linux

package kubetest_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/slipway-dev/slipway/pkg/kubetest"
	"github.com/slipway-dev/slipway/pkg/registrytest"
	"github.com/slipway-dev/slipway/pkg/runtime/runtimetest"
	"github.com/slipway-dev/slipway/pkg/sandbox"
)

var podGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// needNode skips the test when the cluster or its node cannot start here,
// naming what to run.
func needNode(t *testing.T) {
	t.Helper()
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := kubetest.Binary(b); err != nil {
			t.Skip(err)
		}
	}
	if err := kubetest.CheckNode(); err != nil {
		t.Skip(err)
	}
}

// A pod of the static runner image runs to completion on the node, and its
// log, read through the API server (which reaches the kubelet by the
// host's name), is the runner's version of the binary the image holds.
// Close leaves no process, mount or bridge behind.
func TestNodeRunsPod(t *testing.T) {
	needNode(t)
	ctx := context.Background()
	host := registrytest.NewInProcess(t)
	w := runtimetest.New(t, host)

	begin := time.Now()
	dir := t.TempDir()
	c, err := kubetest.Start(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	clusterUp := time.Since(begin)
	n, err := c.StartNode(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	nodeUp := time.Since(begin)
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	pods := dyn.Resource(podGVR).Namespace("default")
	pod := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "runner-version"},
		"spec": map[string]any{
			"nodeName":      n.Name(),
			"restartPolicy": "Never",
			"containers": []any{map[string]any{
				"name": "runner", "image": w.Runner, "args": []any{"version"},
			}},
		},
	}}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := waitPod(t, dyn, "runner-version", "Succeeded")
	t.Logf("start to a completed pod: %s (API server and CRDs %s, node Ready %s, pod %s)",
		time.Since(begin).Round(10*time.Millisecond), clusterUp.Round(10*time.Millisecond),
		nodeUp.Round(10*time.Millisecond), running.Round(10*time.Millisecond))

	logs := podLog(t, c.Config(), "runner-version")
	var v struct {
		RunnerBinarySHA256 string `json:"runnerBinarySha256"`
	}
	if err := json.Unmarshal([]byte(logs), &v); err != nil {
		t.Fatalf("pod log %q is not the runner's version: %v", logs, err)
	}
	ref, err := name.ParseReference(w.Runner)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if want := cf.Config.Labels[sandbox.LabelRunnerSHA256]; v.RunnerBinarySHA256 != want && v.RunnerBinarySHA256 != "sha256:"+want {
		t.Fatalf("the pod ran a runner with sha256 %s, the image holds %s", v.RunnerBinarySHA256, want)
	}

	if len(pidsOf(t, dir)) == 0 {
		t.Fatal("no process runs from the cluster's directory")
	}
	c.Close()
	if pids := pidsOf(t, dir); len(pids) != 0 {
		t.Errorf("processes %v still run from %s after Close", pids, dir)
	}
	if m := mountsUnder(t, dir); len(m) != 0 {
		t.Errorf("still mounted after Close: %v", m)
	}
	if _, err := net.InterfaceByName(kubetest.BridgeName); err == nil {
		t.Errorf("bridge %s still exists after Close", kubetest.BridgeName)
	}
}

// waitPod waits until the pod reaches phase want and returns how long it
// took; a pod that reaches Failed, or takes over two minutes, fails the test.
func waitPod(t *testing.T, dyn dynamic.Interface, name, want string) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last *unstructured.Unstructured
	for {
		p, err := dyn.Resource(podGVR).Namespace("default").Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = p
			phase, _, _ := unstructured.NestedString(p.Object, "status", "phase")
			if phase == want {
				return time.Since(start)
			}
			if phase == "Failed" {
				t.Fatalf("pod %s failed: %v", name, p.Object["status"])
			}
		}
		select {
		case <-ctx.Done():
			var status any
			if last != nil {
				status = last.Object["status"]
			}
			t.Fatalf("pod %s not %s after 2m: %v", name, want, status)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// podLog reads a pod's log through the API server.
func podLog(t *testing.T, cfg *rest.Config, pod string) string {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(cfg.Host + "/api/v1/namespaces/default/pods/" + pod + "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("log of pod %s: %s: %s", pod, resp.Status, b)
	}
	return strings.TrimSpace(string(b))
}

// mountsUnder lists this process's mount points under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Skip("no /proc/self/mountinfo")
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}
