//go:build linux

package kubesandbox_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/egress"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/testharness/kubetest"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// An allow-list pool's sandbox on a real node, in a namespace its render
// labels to enforce Pod Security "restricted": agent-sandbox's controller
// gets its pods past the API server's PodSecurity admission, and the
// claimed pod runs commands through the runner as the non-root sandbox
// user, with the kernel saying so (seccomp filter mode, no_new_privs, no
// effective capability), in a writable workspace seeded with the
// template's own workspace files.
//
// Its egress goes through the pod's proxy (the slipway-egress container):
// the workload's own wget (through $http_proxy) and the runner's probe
// reach an allowed server on the node's bridge address and are refused a
// second server there whose port is not listed, and the proxy's log holds
// both attempts. The NetworkPolicy agent-sandbox made from the template
// was accepted by the API server and allows that one destination only.
// This node's CNI bridge plugin enforces no NetworkPolicy, so a direct
// connection that ignores the proxy is not refused here (the test logs
// what happened): that half is the network plugin's on a real cluster.
// Nothing leaves the machine: both servers listen on the bridge's address.
func TestRestrictedPodEgressThroughProxy(t *testing.T) {
	n := startNode(t, "restricted")
	ctx := context.Background()

	hello := "hello from the node\n"
	// The bridge gets its address with the first pod: IP_FREEBIND binds
	// the servers to it before, so the pool's allow-list can name them.
	lc := net.ListenConfig{Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_FREEBIND, 1) }); err != nil {
			return err
		}
		return serr
	}}
	allowed, err := lc.Listen(ctx, "tcp4", kubetest.PodGateway+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, hello) })}
	go srv.Serve(allowed)
	defer srv.Close()
	denied, err := lc.Listen(ctx, "tcp4", kubetest.PodGateway+":0")
	if err != nil {
		t.Fatal(err)
	}
	deniedSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "should not be reached\n") })}
	go deniedSrv.Serve(denied)
	defer deniedSrv.Close()

	pl := pool.Default(n.pool)
	pl.Spec.Network = pool.Network{Mode: "allow-list", Allow: []string{allowed.Addr().String()}}
	pb, err := pool.Marshal(pl)
	if err != nil {
		t.Fatal(err)
	}
	n.commit(t, map[string]string{
		pool.PoolFile(n.pool): string(pb),
		pool.KustomizationFile(n.pool): "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + n.ns +
			"\nresources: [namespace.yaml]\n",
		"pools/" + n.pool + "/namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + n.ns + "\n",
	})
	// The template ships a file in its workspace: the seed init container
	// copies it into the pod's writable workspace.
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	content := []byte("seeded\n")
	if err := tw.WriteHeader(&tar.Header{Name: "workspace/from-template.txt", Mode: 0o644, Size: int64(len(content)), Uid: 1000, Gid: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(content); err != nil || tw.Close() != nil {
		t.Fatal(err)
	}
	seeded, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tb.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	timg, err := mutate.AppendLayers(pulled(t, n.w.Template), seeded)
	if err != nil {
		t.Fatal(err)
	}
	g := n.generationOf(t, nil, registrytest.Push(t, n.w.Host+"/templates/busybox:seeded", timg).String())
	n.desire(t, 1)

	dyn, err := n.c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, n.ns, metav1.GetOptions{})
	if err != nil || ns.GetLabels()[kubeobjects.LabelPodSecurityEnforce] != "restricted" {
		t.Fatalf("namespace %s: %v, labels %v", n.ns, err, ns.GetLabels())
	}
	var (
		mu       sync.Mutex
		recorded = map[string][]egress.Attempt{}
	)
	b, err := kubesandbox.New(n.c.Config(), n.ns, kubesandbox.WithReadyTimeout(time.Minute),
		kubesandbox.WithEgressRecorder(func(id string, a egress.Attempt) {
			mu.Lock()
			defer mu.Unlock()
			recorded[id] = append(recorded[id], a)
		}))
	if err != nil {
		t.Fatal(err)
	}
	spec := specOf(t, n, g, "r-restricted")
	spec.Network, spec.Allow = sandbox.NetworkAllowList, pl.Spec.Network.Allow
	s, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatalf("create: %v; controller log:\n%s", err, n.c.Log("agent-sandbox-controller"))
	}
	deleted := false
	if s.Network != sandbox.NetworkAllowList || fmt.Sprint(s.Allow) != fmt.Sprint(spec.Allow) {
		t.Errorf("sandbox network %q %v", s.Network, s.Allow)
	}
	defer func() {
		if !deleted {
			b.Delete(ctx, s.ID)
		}
	}()
	run := func(argv ...string) (int, string) {
		t.Helper()
		var out bytes.Buffer
		st, err := s.Exec(ctx, runner.ExecRequest{Argv: argv}, &out, &out)
		if err != nil {
			t.Fatalf("exec %v: %v", argv, err)
		}
		return st.ExitCode, out.String()
	}

	// Confined as rendered, read back from the kernel.
	if code, out := run("id", "-u"); code != 0 || strings.TrimSpace(out) != strconv.Itoa(kubeobjects.SandboxUID) {
		t.Errorf("id -u: %d %q, want %d", code, out, kubeobjects.SandboxUID)
	}
	code, status := run("cat", "/proc/self/status")
	for _, want := range []string{"Seccomp:\t2\n", "NoNewPrivs:\t1\n", "CapEff:\t0000000000000000\n", "CapPrm:\t0000000000000000\n"} {
		if code != 0 || !strings.Contains(status, want) {
			t.Errorf("/proc/self/status lacks %q:\n%s", want, status)
		}
	}
	if code, out := run(kubeobjects.RunnerBinary, "probe", "write", "."); code != 0 {
		t.Errorf("the workspace is not writable: %d %s", code, out)
	}
	if code, out := run("pwd"); code != 0 || strings.TrimSpace(out) != kubeobjects.WorkspaceVolumeDir {
		t.Errorf("pwd: %d %q", code, out)
	}
	if code, out := run("cat", "from-template.txt"); code != 0 || out != "seeded\n" {
		t.Errorf("the template's workspace file in the pod: %d %q", code, out)
	}
	if code, out := run("sh", "-c", "echo more >> from-template.txt && ls -ln from-template.txt"); code != 0 || !strings.Contains(out, " "+strconv.Itoa(kubeobjects.SandboxUID)+" ") {
		t.Errorf("the seeded file is not the sandbox user's to write: %d %q", code, out)
	}
	if code, out := run("touch", "/etc/slipway-was-here"); code == 0 {
		t.Errorf("the sandbox user wrote into the template's /etc: %s", out)
	}

	// Egress through the pod's proxy.
	if code, out := run("wget", "-q", "-O", "-", "http://"+allowed.Addr().String()+"/"); code != 0 || out != hello {
		t.Errorf("wget of the allowed server through $http_proxy: %d %q", code, out)
	}
	if code, out := run("wget", "-q", "-O", "-", "http://"+denied.Addr().String()+"/"); code == 0 || strings.Contains(out, "should not") {
		t.Errorf("wget of a server not listed: %d %q, want refused", code, out)
	}
	if code, out := run(kubeobjects.RunnerBinary, "probe", "connect", sandbox.EgressProxyAddr, allowed.Addr().String()); code != 0 {
		t.Errorf("CONNECT to the allowed server: %d %s", code, out)
	}
	if code, out := run(kubeobjects.RunnerBinary, "probe", "connect", sandbox.EgressProxyAddr, denied.Addr().String()); code != 3 {
		t.Errorf("CONNECT to a server not listed: %d %s, want refused (3)", code, out)
	}
	code, out := run(kubeobjects.RunnerBinary, "probe", "dial", denied.Addr().String())
	t.Logf("a direct connection past the proxy (this node's bridge plugin enforces no NetworkPolicy): exit %d: %s", code, strings.TrimSpace(out))

	// The proxy recorded every attempt in its log.
	cs, err := kubernetes.NewForConfig(n.c.Config())
	if err != nil {
		t.Fatal(err)
	}
	var attempts []egress.Attempt
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		raw, err := cs.CoreV1().Pods(n.ns).GetLogs(s.ID, &corev1.PodLogOptions{Container: kubeobjects.EgressContainer}).Do(ctx).Raw()
		if err != nil {
			t.Fatal(err)
		}
		attempts = attempts[:0]
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			var a egress.Attempt
			if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
				t.Fatalf("egress log line %q: %v", sc.Text(), err)
			}
			attempts = append(attempts, a)
		}
		if len(attempts) >= 4 || time.Now().After(deadline) {
			break
		}
	}
	var ok, refused int
	for _, a := range attempts {
		switch {
		case a.Destination == allowed.Addr().String() && a.Allowed && a.Rule == allowed.Addr().String():
			ok++
		case a.Destination == denied.Addr().String() && !a.Allowed && a.Reason != "":
			refused++
		}
	}
	if len(attempts) != 4 || ok != 2 || refused != 2 {
		t.Errorf("egress log: %+v, want the two allowed and two refused attempts", attempts)
	}
	// The backend followed that log from the claim on and passed each
	// attempt to its recorder (the runtime's, into the run's manifest) by
	// the time Delete returned.
	if err := b.Delete(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	deleted = true
	mu.Lock()
	if got := recorded[s.ID]; len(recorded) != 1 || fmt.Sprint(got) != fmt.Sprint(attempts) {
		t.Errorf("recorded %+v, want the log's %+v", recorded, attempts)
	}
	mu.Unlock()

	// The template's NetworkPolicy, made by agent-sandbox's controller and
	// accepted by the API server: no ingress, egress to the one listed
	// destination only.
	var np *unstructured.Unstructured
	npName := kubeobjects.ObjectName(n.pool, g.ID) + "-network-policy"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		np, err = dyn.Resource(schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}).
			Namespace(n.ns).Get(ctx, npName, metav1.GetOptions{})
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("NetworkPolicy %s: %v", npName, err)
	}
	types, _, _ := unstructured.NestedStringSlice(np.Object, "spec", "policyTypes")
	ingress, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
	egressRules, _, _ := unstructured.NestedSlice(np.Object, "spec", "egress")
	host, port, _ := net.SplitHostPort(allowed.Addr().String())
	want := fmt.Sprintf("[map[ports:[map[port:%s protocol:TCP]] to:[map[ipBlock:map[cidr:%s/32]]]]]", port, host)
	if strings.Join(types, ",") != "Ingress,Egress" || len(ingress) != 0 || fmt.Sprint(egressRules) != want {
		t.Errorf("NetworkPolicy %s: types %v, ingress %v, egress %v; want egress %s", npName, types, ingress, egressRules, want)
	}
}
