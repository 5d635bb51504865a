package egress_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/egress"
	"github.com/slipway-dev/slipway/testharness/dnstest"
)

// world is a proxy enforcing allow, with a DNS server on loopback that
// answers the names below (the test's; nothing is sent off this machine)
// and an origin on 127.0.0.1.
type world struct {
	px     *httptest.Server
	dns    *dnstest.Server
	rec    *recorder
	port   string // the origin's port
	mu     sync.Mutex
	dialed []string // what the proxy dialled, through its Dial hook
}

func newWorld(t *testing.T, allow func(port string) []string) *world {
	t.Helper()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from origin")
	}))
	t.Cleanup(origin.Close)
	_, port, _ := net.SplitHostPort(origin.Listener.Addr().String())
	pol, err := egress.Parse(allow(port))
	if err != nil {
		t.Fatal(err)
	}
	w := &world{rec: &recorder{}, port: port}
	w.dns = dnstest.Start(t, map[string][]string{
		"api.example.com":       {"127.0.0.1"},
		"public.example.com":    {"203.0.113.7", "2001:db8::7"},
		"loopback.example.com":  {"127.0.0.1"},
		"private.example.com":   {"10.1.2.3"},
		"cgnat.example.com":     {"100.64.0.9"},
		"mixed.example.com":     {"203.0.113.8", "192.168.1.1"},
		"metadata.example.com":  {"169.254.169.254"},
		"metadata6.example.com": {"fd00:ec2::254"},
		"mapped.example.com":    {"::ffff:127.0.0.1"},
	})
	// The Dial hook sees the address the proxy chose to dial, and reaches
	// the local origin instead: this machine cannot reach a public address,
	// and the decision is what is under test.
	origAddr := origin.Listener.Addr().String()
	px := &egress.Proxy{Policy: pol, Record: w.rec.add, Resolver: egress.ResolverAt(w.dns.Addr),
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			w.mu.Lock()
			w.dialed = append(w.dialed, addr)
			w.mu.Unlock()
			var d net.Dialer
			return d.DialContext(ctx, network, origAddr)
		}}
	w.px = httptest.NewServer(px)
	t.Cleanup(w.px.Close)
	return w
}

func (w *world) dials() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.dialed)
}

// ask sends one request through the proxy, as plain HTTP (GET
// http://dest/) or CONNECT (then a GET through the tunnel), and returns the
// proxy's status and the body (the origin's, or the proxy's refusal).
func (w *world) ask(t *testing.T, method, dest string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", w.px.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	if method == http.MethodConnect {
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatalf("CONNECT %s: %v", dest, err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
	}
	target := "/"
	if method != http.MethodConnect {
		target = "http://" + dest + "/"
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, dest)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, dest, err)
	}
	b, _ := io.ReadAll(resp.Body)
	if method == http.MethodConnect {
		return http.StatusOK, string(b) // the tunnel's answer is the origin's
	}
	return resp.StatusCode, string(b)
}

// TestProxyLooksUpNoUnlistedName (issue 37, finding 5): a name no entry
// lists is refused before any lookup, over CONNECT and plain HTTP, so the
// test's DNS server is asked nothing; the refusals are recorded. A listed
// name is then looked up (the server does count queries).
func TestProxyLooksUpNoUnlistedName(t *testing.T) {
	w := newWorld(t, func(p string) []string { return []string{"api.example.com:" + p, "127.0.0.1/32:" + p} })
	for _, method := range []string{http.MethodConnect, http.MethodGet} {
		for _, dest := range []string{
			"c2VjcmV0LWRhdGE.exfil.attacker.test:" + w.port, // data in the name
			"api.example.com.attacker.test:" + w.port,
			"x.api.example.com:" + w.port, // under a listed name, not listed
			"api.example.com:1",           // a listed name, another port
			"localhost:" + w.port,
		} {
			code, body := w.ask(t, method, dest)
			if code != http.StatusForbidden || !strings.Contains(body, "is on no allow-list entry (not looked up)") {
				t.Errorf("%s %s: %d %q", method, dest, code, body)
			}
		}
	}
	if q := w.dns.Queries(); len(q) != 0 {
		t.Fatalf("the proxy sent %d DNS queries for names no entry lists: %v", len(q), q)
	}
	if d := w.dials(); len(d) != 0 {
		t.Fatalf("dialled %v", d)
	}
	all := w.rec.all()
	if len(all) != 10 {
		t.Fatalf("%d attempts recorded, want 10: %+v", len(all), all)
	}
	for _, a := range all {
		if a.Allowed || a.Address != "" || a.Destination == "" || !strings.Contains(a.Reason, "not looked up") {
			t.Errorf("recorded %+v", a)
		}
	}

	// A listed name is looked up, at the test's server only, and reached
	// (at 127.0.0.1, which an IP entry lists).
	for _, method := range []string{http.MethodConnect, http.MethodGet} {
		if code, body := w.ask(t, method, "api.example.com:"+w.port); code != http.StatusOK || body != "hello from origin" {
			t.Fatalf("%s api.example.com: %d %q", method, code, body)
		}
	}
	var names []string
	for _, q := range w.dns.Queries() {
		names = append(names, q.Name)
	}
	if len(names) == 0 || slices.ContainsFunc(names, func(n string) bool { return n != "api.example.com" && !strings.HasPrefix(n, "api.example.com.") }) {
		t.Fatalf("queries %v, want api.example.com only", names)
	}
	if d := w.dials(); len(d) != 2 || d[0] != "127.0.0.1:"+w.port {
		t.Fatalf("dialled %v", d)
	}
}

// TestProxyRefusesRebinding: a listed name that resolves to loopback, a
// private or shared address, or a link-local (cloud metadata) address is
// refused with the address and the reason, over CONNECT and plain HTTP,
// and nothing is dialled; a name with one such address among public ones
// too.
func TestProxyRefusesRebinding(t *testing.T) {
	w := newWorld(t, func(p string) []string { return []string{"*.example.com:" + p, "*.example.com:80"} })
	for _, method := range []string{http.MethodConnect, http.MethodGet} {
		for _, c := range []struct{ name, addr, reason string }{
			{"loopback.example.com", "127.0.0.1", "a loopback or private address no IP or CIDR entry lists"},
			{"mapped.example.com", "127.0.0.1", "a loopback or private address no IP or CIDR entry lists"},
			{"private.example.com", "10.1.2.3", "a loopback or private address no IP or CIDR entry lists"},
			{"cgnat.example.com", "100.64.0.9", "a loopback or private address no IP or CIDR entry lists"},
			{"mixed.example.com", "192.168.1.1", "a loopback or private address no IP or CIDR entry lists"},
			{"metadata.example.com", "169.254.169.254", "link-local (cloud metadata): never allowed"},
			{"metadata6.example.com", "fd00:ec2::254", "link-local (cloud metadata): never allowed"},
		} {
			for _, port := range []string{w.port, "80"} {
				code, body := w.ask(t, method, c.name+":"+port)
				if code != http.StatusForbidden || !strings.Contains(body, c.addr) || !strings.Contains(body, c.reason) {
					t.Errorf("%s %s:%s: %d %q", method, c.name, port, code, body)
				}
			}
		}
	}
	if d := w.dials(); len(d) != 0 {
		t.Fatalf("dialled %v", d)
	}
	for _, a := range w.rec.all() {
		if a.Allowed || a.Address == "" {
			t.Errorf("recorded %+v", a)
		}
	}
}

// TestProxyDialsTheAddressItChecked: a listed name that resolves to public
// addresses is allowed and the proxy dials the first address it checked
// (seen through its Dial hook, which then reaches the local origin: this
// machine has no route to a public address). The same address listed by
// IP, and a private address listed by CIDR beside the name, are allowed.
func TestProxyDialsTheAddressItChecked(t *testing.T) {
	w := newWorld(t, func(p string) []string {
		return []string{"public.example.com:" + p, "private.example.com:" + p, "10.0.0.0/8:" + p}
	})
	for _, method := range []string{http.MethodConnect, http.MethodGet} {
		for _, name := range []string{"public.example.com", "private.example.com"} {
			if code, body := w.ask(t, method, name+":"+w.port); code != http.StatusOK || body != "hello from origin" {
				t.Fatalf("%s %s: %d %q", method, name, code, body)
			}
		}
	}
	want := []string{"203.0.113.7:" + w.port, "10.1.2.3:" + w.port, "203.0.113.7:" + w.port, "10.1.2.3:" + w.port}
	if d := w.dials(); !slices.Equal(d, want) {
		t.Fatalf("dialled %v, want %v", d, want)
	}
	var rules []string
	for deadline := time.Now().Add(10 * time.Second); len(w.rec.all()) < 4 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	for _, a := range w.rec.all() {
		if !a.Allowed || a.BytesIn == 0 {
			t.Errorf("recorded %+v", a)
		}
		rules = append(rules, a.Address+" by "+a.Rule)
	}
	slices.Sort(rules)
	if got := strings.Join(slices.Compact(rules), ", "); got != "10.1.2.3 by 10.0.0.0/8:"+w.port+", 203.0.113.7 by public.example.com:"+w.port {
		t.Fatalf("recorded %s", got)
	}
}
