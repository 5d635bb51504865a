package egress_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/egress"
	"github.com/slipway-dev/slipway/testharness/dnstest"
)

type recorder struct {
	mu sync.Mutex
	a  []egress.Attempt
}

func (r *recorder) add(a egress.Attempt) { r.mu.Lock(); r.a = append(r.a, a); r.mu.Unlock() }
func (r *recorder) all() []egress.Attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]egress.Attempt(nil), r.a...)
}

func setup(t *testing.T, allow func(port string) []string) (*http.Client, *http.Client, string, *recorder) {
	t.Helper()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello from origin") }))
	t.Cleanup(origin.Close)
	tlsOrigin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello over tls") }))
	t.Cleanup(tlsOrigin.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(origin.URL, "http://"))
	_, tport, _ := net.SplitHostPort(strings.TrimPrefix(tlsOrigin.URL, "https://"))
	pol, err := egress.Parse(append(allow(port), allow(tport)...))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	dns := dnstest.Start(t, map[string][]string{"origin.test": {"127.0.0.1"}})
	px := httptest.NewServer(&egress.Proxy{Policy: pol, Record: rec.add, Resolver: egress.ResolverAt(dns.Addr)})
	t.Cleanup(px.Close)
	pu, _ := url.Parse(px.URL)
	plain := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	tlsTr := tlsOrigin.Client().Transport.(*http.Transport).Clone()
	tlsTr.Proxy = http.ProxyURL(pu)
	tlsTr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // the test's own origin
	return plain, &http.Client{Transport: tlsTr}, port + " " + tport, rec
}

func get(c *http.Client, u string) (int, string) {
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProxyAllowsListedAndRecords(t *testing.T) {
	plain, tlsc, ports, rec := setup(t, func(p string) []string { return []string{"127.0.0.1/32:" + p} })
	port, tport := strings.Fields(ports)[0], strings.Fields(ports)[1]
	if code, body := get(plain, "http://127.0.0.1:"+port+"/x"); code != 200 || body != "hello from origin" {
		t.Fatalf("plain http: %d %q", code, body)
	}
	if code, body := get(tlsc, "https://127.0.0.1:"+tport+"/"); code != 200 || body != "hello over tls" {
		t.Fatalf("CONNECT: %d %q", code, body)
	}
	// A port no entry lists.
	if code, _ := get(plain, "http://127.0.0.1:1/"); code != 403 {
		t.Fatalf("unlisted port: %d", code)
	}
	// A tunnel is recorded when it closes, with its byte counts.
	tlsc.CloseIdleConnections()
	var all []egress.Attempt
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if all = rec.all(); len(all) == 3 {
			break
		}
	}
	slices.SortFunc(all, func(a, b egress.Attempt) int { return a.Time.Compare(b.Time) })
	if len(all) != 3 || !all[0].Allowed || all[0].BytesIn == 0 || all[0].BytesOut == 0 || all[1].Method != "CONNECT" || !all[1].Allowed ||
		all[1].BytesIn == 0 || all[2].Allowed || all[2].Destination != "127.0.0.1:1" {
		t.Fatalf("attempts %+v", all)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, e := range []string{"example.com", "example.com:0", "example.com:http", "10.0.0.0/33:443", "*.:443", "bad_name!:80", ":443"} {
		if _, err := egress.Parse([]string{"ok.example.com:443", e}); !errors.Is(err, egress.ErrInvalid) || !strings.Contains(err.Error(), "allow[1]") {
			t.Errorf("%q: err = %v", e, err)
		}
	}
}
