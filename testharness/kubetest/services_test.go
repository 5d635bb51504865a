//go:build linux

package kubetest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/slipway-dev/slipway/pkg/release/template"
	"github.com/slipway-dev/slipway/testharness/kubetest"
	"github.com/slipway-dev/slipway/testharness/need"
	"github.com/slipway-dev/slipway/testharness/pgtest"
	"github.com/slipway-dev/slipway/testharness/registrytest"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

var (
	deployGVR  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	serviceGVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	sliceGVR   = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
)

// A cluster WithServices routes as a real one: kube-controller-manager
// makes the default namespace's ServiceAccount and kube-root-ca.crt, turns
// a Deployment of 2 replicas into 2 Ready pods and writes its Service's
// EndpointSlice; another pod finds the Service by its name (ClusterDNS)
// and kube-proxy routes it to both replicas, and the in-cluster kubernetes
// Service to the API server, which authenticates the pod's ServiceAccount token. Close
// leaves no kube-proxy rule and no bridge behind.
func TestServicesRoute(t *testing.T) {
	kubetest.SkipUnlessNode(t, "kube-proxy", "kube-controller-manager", "iptables")
	ctx := context.Background()
	host := registrytest.NewInProcess(t)
	probe := probeImage(t, host)
	sysctlsBefore := readSysctls(t)

	begin := time.Now()
	dir := t.TempDir()
	c, err := kubetest.Start(ctx, dir, kubetest.WithServices())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer func() {
		if t.Failed() {
			for _, p := range []string{"kube-controller-manager", "kube-proxy", "kubelet"} {
				t.Logf("%s log ends:\n%s", p, c.Log(p))
			}
		}
	}()
	clusterUp := time.Since(begin)
	n, err := c.StartNode(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	nodeUp := time.Since(begin)
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	// What PrepareNamespace writes by hand otherwise, made by the
	// controllers: no field manager of the harness's.
	for _, o := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{{schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, "default"}, {schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "kube-root-ca.crt"}} {
		u, err := dyn.Resource(o.gvr).Namespace("default").Get(ctx, o.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range u.GetManagedFields() {
			if m.Manager == "kubetest" {
				t.Fatalf("%s %s was written by the harness, not by kube-controller-manager", o.gvr.Resource, o.name)
			}
		}
	}

	labels := map[string]any{"app": "echo"}
	deploy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "echo"},
		"spec": map[string]any{
			"replicas": int64(2),
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{
					"containers": []any{map[string]any{
						"name": "echo", "image": probe, "args": []any{"serve", ":8080"},
						"ports":          []any{map[string]any{"containerPort": int64(8080)}},
						"readinessProbe": map[string]any{"httpGet": map[string]any{"path": "/", "port": int64(8080)}, "periodSeconds": int64(1)},
					}},
				},
			},
		},
	}}
	if _, err := dyn.Resource(deployGVR).Namespace("default").Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "echo"},
		"spec": map[string]any{
			"selector": labels,
			"ports":    []any{map[string]any{"port": int64(80), "targetPort": int64(8080)}},
		},
	}}
	created, err := dyn.Resource(serviceGVR).Namespace("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clusterIP, _, _ := unstructured.NestedString(created.Object, "spec", "clusterIP")
	if clusterIP == "" {
		t.Fatalf("service echo has no cluster IP: %v", created.Object["spec"])
	}

	ready := waitFor(t, "Deployment echo with 2 ready replicas", func() bool {
		d, err := dyn.Resource(deployGVR).Namespace("default").Get(ctx, "echo", metav1.GetOptions{})
		if err != nil {
			return false
		}
		r, _, _ := unstructured.NestedInt64(d.Object, "status", "readyReplicas")
		return r == 2
	})
	replicas := podNames(t, dyn, "app=echo")
	if len(replicas) != 2 {
		t.Fatalf("the Deployment's pods are %v, want 2", replicas)
	}
	waitFor(t, "an EndpointSlice of service echo with 2 ready endpoints", func() bool {
		list, err := dyn.Resource(sliceGVR).Namespace("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=echo"})
		if err != nil {
			return false
		}
		readyEndpoints := 0
		for _, s := range list.Items {
			eps, _, _ := unstructured.NestedSlice(s.Object, "endpoints")
			for _, e := range eps {
				if r, _, _ := unstructured.NestedBool(e.(map[string]any), "conditions", "ready"); r {
					readyEndpoints++
				}
			}
		}
		return readyEndpoints == 2
	})

	// From another pod, the Service's name (the cluster DNS answers with
	// its cluster IP) reaches both replicas, as the control plane reaches
	// slipway-runtime.slipway-system.svc.
	runPod(t, c, n.Name(), "fetch", probe, "fetch", "http://echo.default.svc/", "2")
	var answered []string
	if out := podLog(t, c.Config(), "fetch"); json.Unmarshal([]byte(out), &answered) != nil {
		t.Fatalf("pod fetch printed %q, not a JSON list of host names", out)
	}
	if !slices.Equal(answered, replicas) {
		t.Fatalf("service echo (cluster IP %s) answered from %v, the Deployment's pods are %v", clusterIP, answered, replicas)
	}

	// From the host too, through kube-proxy's rules; and a Service IP
	// nothing programmed stays on the machine, unanswered: by the default
	// route it would reach whatever answers that address outside (this
	// machine's network answers any HTTP request with a 404).
	hostSeesService(t, "http://"+clusterIP+"/", replicas)
	hostDoesNotReach(t, ctx, dyn)

	// The in-cluster kubernetes Service reaches the API server, which
	// knows the pod's token.
	runPod(t, c, n.Name(), "whoami", probe, "whoami")
	if got, want := podLog(t, c.Config(), "whoami"), "system:serviceaccount:default:default"; got != want {
		t.Fatalf("through the kubernetes Service the API server says the pod is %q, want %q", got, want)
	}
	t.Logf("cluster with Services up %s, node and kube-proxy %s, Deployment ready %s after, whole %s",
		clusterUp.Round(10*time.Millisecond), nodeUp.Round(10*time.Millisecond), ready.Round(10*time.Millisecond),
		time.Since(begin).Round(10*time.Millisecond))

	if after := readSysctls(t); !maps.Equal(after, sysctlsBefore) {
		t.Fatalf("kube-proxy changed the machine's sysctls: before %v, with it running %v", sysctlsBefore, after)
	}

	c.Close()
	if out, err := exec.Command("iptables", "-t", "nat", "-S", "KUBE-SERVICES").CombinedOutput(); err == nil {
		t.Fatalf("kube-proxy's KUBE-SERVICES chain is still there after Close:\n%s", out)
	}
	if _, err := os.Stat("/sys/class/net/" + kubetest.BridgeName); err == nil {
		t.Fatalf("bridge %s is still there after Close", kubetest.BridgeName)
	}
}

// hostSeesService GETs url from the host (a fresh connection) and wants
// one of names as the answer.
func hostSeesService(t *testing.T, url string, names []string) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("the host's GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !slices.Contains(names, strings.TrimSpace(string(b))) {
		t.Fatalf("the host's GET %s answered %s %q, want 200 from one of %v", url, resp.Status, b, names)
	}
}

// hostDoesNotReach wants a Service IP no Service holds to go through the
// node's bridge from the host and get no answer.
func hostDoesNotReach(t *testing.T, ctx context.Context, dyn dynamic.Interface) {
	t.Helper()
	list, err := dyn.Resource(serviceGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, s := range list.Items {
		ip, _, _ := unstructured.NestedString(s.Object, "spec", "clusterIP")
		held[ip] = true
	}
	free := ""
	for i := 254; i > 1 && free == ""; i-- {
		if ip := fmt.Sprintf("10.0.0.%d", i); !held[ip] {
			free = ip
		}
	}
	out, err := exec.Command("ip", "route", "get", free).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "dev "+kubetest.BridgeName) {
		t.Fatalf("ip route get %s: %v: %s (want it through %s)", free, err, out, kubetest.BridgeName)
	}
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	if resp, err := hc.Get("http://" + free + ":7070/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("GET http://%s:7070/healthz, a Service IP no Service holds, answered %s (server %q) from off the node", free, resp.Status, resp.Header.Get("Server"))
	}
}

// keptSysctls are the machine's settings a kube-proxy kept local leaves
// alone: conntrack's limits and timeouts, and route_localnet (localhost
// NodePorts).
var keptSysctls = []string{
	"net/netfilter/nf_conntrack_max", "net/netfilter/nf_conntrack_tcp_timeout_established",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait", "net/netfilter/nf_conntrack_tcp_be_liberal",
	"net/netfilter/nf_conntrack_udp_timeout", "net/netfilter/nf_conntrack_udp_timeout_stream",
	"net/ipv4/conf/all/route_localnet",
}

// readSysctls reads keptSysctls (a missing one reads as its error).
func readSysctls(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range keptSysctls {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			out[k] = err.Error()
			continue
		}
		out[k] = strings.TrimSpace(string(b))
	}
	return out
}

// probeImage builds testdata/probe and pushes a one-file image of it
// (entrypoint /probe) to host, returning its digest reference.
func probeImage(t *testing.T, host string) string {
	t.Helper()
	root := runtimetest.Root(t)
	dir := filepath.Join(t.TempDir(), "rootfs")
	cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "probe"), "./testharness/kubetest/testdata/probe")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build probe: %v\n%s", err, out)
	}
	img, closeImg, err := template.ImageFromDir(context.Background(), dir, time.Unix(0, 0), v1.Platform{OS: "linux", Architecture: "amd64"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeImg()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg := cf.Config
	cfg.Entrypoint = []string{"/probe"}
	if img, err = mutate.Config(img, cfg); err != nil {
		t.Fatal(err)
	}
	return registrytest.Push(t, host+"/kubetest/probe:v1", img).String()
}

// runPod runs a pod of image with args on node to completion; when it
// fails, its log says why.
func runPod(t *testing.T, c *kubetest.Cluster, node, name, image string, args ...string) {
	t.Helper()
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	a := make([]any, len(args))
	for i, s := range args {
		a[i] = s
	}
	pod := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"nodeName": node, "restartPolicy": "Never",
			"containers": []any{map[string]any{"name": name, "image": image, "args": a}},
		},
	}}
	if _, err := dyn.Resource(podGVR).Namespace("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var phase string
	waitFor(t, "pod "+name+" ended", func() bool {
		p, err := dyn.Resource(podGVR).Namespace("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		phase, _, _ = unstructured.NestedString(p.Object, "status", "phase")
		return phase == "Succeeded" || phase == "Failed"
	})
	if phase != "Succeeded" {
		t.Fatalf("pod %s %s; its log:\n%s", name, phase, podLog(t, c.Config(), name))
	}
}

// podNames lists the names of the default namespace's pods matching
// selector, sorted.
func podNames(t *testing.T, dyn dynamic.Interface, selector string) []string {
	t.Helper()
	list, err := dyn.Resource(podGVR).Namespace("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.GetName())
	}
	slices.Sort(names)
	return names
}

// waitFor polls ok until it holds (at most three minutes: a loaded machine)
// and returns how long it took.
func waitFor(t *testing.T, what string, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("no %s after 3m", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return time.Since(start)
}

// A pod reaches the host's PostgreSQL over the node's bridge (the server
// listening on PodGateway as well as 127.0.0.1), as Slipway's planes in the
// cluster reach their database in tests: the server sees the pod's own
// address, from PodCIDR.
func TestPodReachesHostPostgres(t *testing.T) {
	kubetest.SkipUnlessNode(t, "kube-proxy", "kube-controller-manager", "iptables")
	_, err := pgtest.BinDir()
	need.Err(t, err)
	ctx := context.Background()
	host := registrytest.NewInProcess(t)
	probe := probeImage(t, host)
	c, err := kubetest.Start(ctx, t.TempDir(), kubetest.WithServices())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The server's directory must be enterable by the user postgres runs
	// as (a test's temporary directory is not).
	pgDir, err := os.MkdirTemp("", "kubetest-pg-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(pgDir)
	pg, err := pgtest.Start(ctx, pgDir, pgtest.ListenAlso(kubetest.PodGateway, kubetest.PodCIDR))
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	n, err := c.StartNode(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	runPod(t, c, n.Name(), "pg", probe, "pg", pg.DSNAlso("postgres"))
	addr := podLog(t, c.Config(), "pg")
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	p, err := dyn.Resource(podGVR).Namespace("default").Get(ctx, "pg", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podIP, _, _ := unstructured.NestedString(p.Object, "status", "podIP")
	_, pods, _ := net.ParseCIDR(kubetest.PodCIDR)
	if ip := net.ParseIP(addr); ip == nil || addr != podIP || !pods.Contains(ip) {
		t.Fatalf("PostgreSQL saw the pod's connection come from %q, the pod's address is %q in %s", addr, podIP, kubetest.PodCIDR)
	}
}
