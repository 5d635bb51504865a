//go:build linux

package kubetest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/testharness/kubetest"
	"github.com/slipway-dev/slipway/testharness/registrytest"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

var podGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// A pod of the static runner image runs to completion on the node, and its
// log, read through the API server (which reaches the kubelet by the
// host's name), is the runner's version of the binary the image holds.
// Close leaves no process, mount or bridge behind.
func TestNodeRunsPod(t *testing.T) {
	kubetest.SkipUnlessNode(t)
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

	// A pod that still runs at Close.
	sleeper := w.TemplateWithEntrypoint(t, "/bin/sleep", "86400")
	pod.SetName("sleeper")
	_ = unstructured.SetNestedSlice(pod.Object, []any{map[string]any{"name": "sleep", "image": sleeper}}, "spec", "containers")
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, dyn, "sleeper", "Running")

	// The shims (their command line names containerd's socket in dir)
	// and the pods' processes under them.
	pids := pidsOf(t, dir)
	under := childrenOf(t, pids)
	if len(pids) == 0 || len(under) == 0 {
		t.Fatalf("want processes running from the cluster's directory and pod processes under them, found %v and %v", pids, under)
	}
	c.Close()
	if pids := pidsOf(t, dir); len(pids) != 0 {
		t.Errorf("processes %v still run from %s after Close", pids, dir)
	}
	for _, pid := range under {
		if alive(pid) {
			t.Errorf("pod process %d still runs after Close", pid)
		}
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

// childrenOf lists the processes whose parent is one of pids.
func childrenOf(t *testing.T, pids []int) []int {
	t.Helper()
	parents := map[int]bool{}
	for _, p := range pids {
		parents[p] = true
	}
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if ppid, _ := strconv.Atoi(f[1]); len(f) > 1 && parents[ppid] {
			out = append(out, pid)
		}
	}
	return out
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// A test binary that dies with a pod running leaves the pod and its shim
// behind (its kubelet and containerd die with it); the next StartNode
// kills them.
func TestNodeAfterDeadTest(t *testing.T) {
	if dir := os.Getenv("KUBETEST_DEAD_CHILD_DIR"); dir != "" {
		deadChild(t, dir)
		return
	}
	kubetest.SkipUnlessNode(t)
	host := registrytest.NewInProcess(t)
	w := runtimetest.New(t, host)
	sleeper := w.TemplateWithEntrypoint(t, "/bin/sleep", "86400")
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^TestNodeAfterDeadTest$", "-test.v")
	child.Env = append(os.Environ(), "KUBETEST_DEAD_CHILD_DIR="+dir, "KUBETEST_DEAD_CHILD_REGISTRY="+host, "KUBETEST_DEAD_CHILD_IMAGE="+sleeper)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = child.Stdout
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = child.Process.Kill()
		_ = child.Wait()
		for _, m := range mountsUnder(t, dir) {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}()
	var log strings.Builder
	sc := bufio.NewScanner(out)
	running := false
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "POD RUNNING") {
			running = true
			break
		}
	}
	if !running {
		t.Fatalf("the child test never ran its pod:\n%s", log.String())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	// containerd, kubelet, the API server and etcd die with the child (the
	// parent-death signal); the shim (its command line names the socket in
	// dir) and the pod's processes under it do not.
	var shims []int
	deadline := time.Now().Add(10 * time.Second)
	for {
		shims = pidsOf(t, dir)
		if len(shims) == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	pods := childrenOf(t, shims)
	if len(shims) != 1 || len(pods) != 2 {
		t.Fatalf("want the shim and the pod's two processes (pause, sleep) left by the dead test, have %v and %v", shims, pods)
	}

	c := kubetest.New(t)
	if _, err := c.StartNode(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	for _, pid := range append(shims, pods...) {
		if alive(pid) {
			t.Errorf("process %d of the dead test's node still runs after StartNode", pid)
		}
	}
}

// deadChild is the child of TestNodeAfterDeadTest: a node with a pod
// running, then it waits to be killed.
func deadChild(t *testing.T, dir string) {
	ctx := context.Background()
	c, err := kubetest.Start(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.StartNode(ctx, os.Getenv("KUBETEST_DEAD_CHILD_REGISTRY"))
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	pod := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "sleeper"},
		"spec": map[string]any{
			"nodeName": n.Name(), "restartPolicy": "Never",
			"containers": []any{map[string]any{"name": "sleep", "image": os.Getenv("KUBETEST_DEAD_CHILD_IMAGE")}},
		},
	}}
	if _, err := dyn.Resource(podGVR).Namespace("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, dyn, "sleeper", "Running")
	fmt.Println("POD RUNNING")
	select {}
}
