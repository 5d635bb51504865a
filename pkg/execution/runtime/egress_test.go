package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/egress"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// hostIPv4 is a non-loopback address of the host (a sandbox's 127.0.0.1
// is its own).
func hostIPv4(t testing.TB) string {
	t.Helper()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatal("the host has no non-loopback IPv4 address to test with")
	return ""
}

// originServer serves "hello from origin" on the host's address.
func originServer(t testing.TB, ip string) (port string) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello from origin") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port
}

// A pool with network mode allow-list: its claim's sandbox reaches the
// listed destination through its egress proxy and is refused another
// port and the metadata address; the run's manifest lists all three
// attempts, and the denials count under the run's policy revision.
func TestAllowListPoolRecordsEgress(t *testing.T) {
	w := newWarmWorld(t)
	ctx := context.Background()
	ip := hostIPv4(t)
	port := originServer(t, ip)
	other := originServer(t, ip)

	var rtp atomic.Pointer[runtime.Runtime]
	be := newLocalBackend(t, local.WithEgressRecorder(func(id string, a egress.Attempt) { rtp.Load().RecordEgress(id, a) }))
	store := newStore(t)
	d := w.desired(t, "rev-1", 1, w.generation(t, nil))
	d.PolicyRevision = "0123456789abcdef0123456789abcdef01234567" // the verification policy's commit
	d.Pools["agents"].Pool.Spec.Network = pool.Network{Mode: "allow-list", Allow: []string{ip + "/32:" + port}}
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute)
	rtp.Store(rt)
	if rep := warm.Reconcile(ctx, d); len(rep.Errors) > 0 {
		t.Fatal(rep.Errors)
	}
	gr, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sh := func(script string) string {
		t.Helper()
		out.Reset()
		if _, err := rt.Exec(ctx, gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"sh", "-c", script}, TimeoutMs: 60000}, &out, &out); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	if got := sh(fmt.Sprintf("wget -q -O - http://%s:%s/", ip, port)); got != "hello from origin" {
		t.Fatalf("allowed destination: %q", got)
	}
	// (busybox wget crashes on a proxy's 403: the refused requests go by nc.)
	for _, hp := range []string{ip + ":" + other, "169.254.169.254:80"} {
		if got := sh(fmt.Sprintf(`(printf 'GET http://%[1]s/ HTTP/1.1\r\nHost: %[1]s\r\n\r\n'; sleep 1) | nc -w 3 127.0.0.1 3128`, hp)); !strings.HasPrefix(got, "HTTP/1.1 403 ") {
			t.Fatalf("denied destination %s: %q", hp, got)
		}
	}
	zero := 0
	if err := rt.Release(ctx, gr.RunID, gr.Token, &zero); err != nil {
		t.Fatal(err)
	}
	m, err := store.Get(ctx, gr.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range m.Egress {
		got = append(got, fmt.Sprintf("%s %s %v %s", a.Method, a.Destination, a.Allowed, a.Rule))
	}
	want := []string{"GET " + ip + ":" + port + " true " + ip + "/32:" + port, "GET " + ip + ":" + other + " false ", "GET 169.254.169.254:80 false "}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || m.Egress[0].BytesIn == 0 || !strings.Contains(m.Egress[2].Reason, "link-local") {
		t.Fatalf("manifest egress:\n%s\nwant:\n%s\n%+v", strings.Join(got, "\n"), strings.Join(want, "\n"), m.Egress)
	}
	if n := rt.PolicyDenials()[m.PolicyRevision]; m.PolicyRevision == "" || n != 2 {
		t.Fatalf("denials under %q: %v", m.PolicyRevision, rt.PolicyDenials())
	}
	srv, err := runtime.NewServer(rt, nil, be, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	srv.ServeHTTP(rec, req)
	if line := fmt.Sprintf("slipway_policy_denial_count_total{policy_revision=%q} 2", m.PolicyRevision); !strings.Contains(rec.Body.String(), line) {
		t.Fatalf("metrics lack %q:\n%s", line, rec.Body.String())
	}
}

// The network proof of an allow-list pool: no route of the sandbox's own,
// the approved destination reached through the proxy, a denied one and
// the metadata address refused; an approved destination that cannot be
// reached fails the proof.
func TestNetworkProofAllowList(t *testing.T) {
	w := newWarmWorld(t)
	ctx := context.Background()
	ip := hostIPv4(t)
	port := originServer(t, ip)
	be := newLocalBackend(t)
	g1 := w.generation(t, nil)
	g2 := w.generation(t, g1)
	d := w.desired(t, "rev-1", 1, g1, g2)
	spec := &d.Pools["agents"].Pool.Spec
	spec.Network = pool.Network{Mode: "allow-list", Allow: []string{ip + ":" + port, "*.example.com:443"}}
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, newStore(t), time.Minute)
	defer rt.Close()
	if rep := warm.Reconcile(ctx, d); len(rep.Errors) > 0 {
		t.Fatal(rep.Errors)
	}
	res, err := rt.Prove(ctx, "agents", runtimeapi.ProofRequest{Generation: g2.ID, Rollout: "ro-net", Checks: []string{"allocate", "network", "cleanup"}})
	if err != nil {
		t.Fatal(err)
	}
	e := res.Evidence[1]
	if !res.Passed() || !strings.Contains(e.Reason, "(pool network: allow-list)") ||
		!strings.Contains(e.Reason, "through the egress proxy: approved "+ip+":"+port+" reached, denied 169.254.169.254:80 and "+ip+":") {
		t.Fatalf("network proof: %+v", res.Evidence)
	}

	// An approved destination nothing listens on.
	spec.Network.Allow = []string{ip + ":1"}
	d.Pools["agents"].Pool.Spec = *spec
	if rep := warm.Reconcile(ctx, d); len(rep.Errors) > 0 {
		t.Fatal(rep.Errors)
	}
	fillWarm(t, ctx, warm, be, d, g2.ID, 1)
	for _, s := range mustList(t, be) { // the members made for the old list are gone
		if s.Owner == sandbox.OwnerWarm && strings.Join(s.Allow, ",") != ip+":1" {
			t.Fatalf("warm member %s of the old network %v", s.ID, s.Allow)
		}
	}
	res, err = rt.Prove(ctx, "agents", runtimeapi.ProofRequest{Generation: g2.ID, Rollout: "ro-net2", Checks: []string{"network"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Passed() || !strings.Contains(res.Evidence[0].Reason, "the approved destination "+ip+":1 was not reached through the egress proxy") {
		t.Fatalf("network proof with an unreachable approved destination: %+v", res.Evidence)
	}
}

func mustList(t *testing.T, be *local.Backend) []*sandbox.Sandbox {
	t.Helper()
	all, err := be.List(context.Background(), sandbox.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// A pool whose network changes hands out no warm member made for the old
// one: the claim gets a sandbox with the new network, and Reconcile
// retires the old members.
func TestWarmMembersFollowTheNetwork(t *testing.T) {
	w := newWarmWorld(t)
	ctx := context.Background()
	be := newLocalBackend(t)
	d := w.desired(t, "rev-1", 1, w.generation(t, nil))
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, newStore(t), time.Minute)
	defer rt.Close()
	if rep := warm.Reconcile(ctx, d); len(rep.Errors) > 0 || len(rep.Created) != 1 {
		t.Fatal(rep)
	}
	old := rep0(t, be)
	d.Pools["agents"].Pool.Spec.Network = pool.Network{Mode: "allow-list", Allow: []string{"192.0.2.10:443"}}
	gr, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents"})
	if err != nil {
		t.Fatal(err)
	}
	if gr.Warm || gr.SandboxID == old {
		t.Fatalf("the claim got the deny pool's warm member %s: %+v", old, gr)
	}
	for _, s := range mustList(t, be) {
		if s.ID == gr.SandboxID && (s.Network != sandbox.NetworkAllowList || strings.Join(s.Allow, ",") != "192.0.2.10:443") {
			t.Fatalf("claimed sandbox network %q %v", s.Network, s.Allow)
		}
		if s.ID == old {
			t.Fatalf("the old member %s is still there", old)
		}
	}
}

// rep0 is the id of the one sandbox be has.
func rep0(t *testing.T, be *local.Backend) string {
	t.Helper()
	all := mustList(t, be)
	if len(all) != 1 {
		t.Fatalf("%d sandboxes, want 1", len(all))
	}
	return all[0].ID
}
