package egress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"

	"github.com/slipway-dev/slipway/pkg/execution/egress"
)

// A pool's network.allow entries parsed into a Policy, and Check deciding
// on the address a name resolved to: a name entry reaches public addresses
// only (so a name rebound to loopback is refused), a CIDR entry lists
// private ones, and link-local (cloud metadata) is never allowed.
func ExamplePolicy_Check() {
	pol, err := egress.Parse([]string{"api.example.com:443", "*.pkg.example.org:443", "10.0.0.0/8:5432"})
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range []struct {
		host string
		port uint16
		ip   string
	}{
		{"api.example.com", 443, "93.184.215.14"},
		{"api.example.com", 80, "93.184.215.14"},
		{"api.example.com", 443, "127.0.0.1"},
		{"eu.pkg.example.org", 443, "93.184.215.15"},
		{"db.internal", 5432, "10.1.2.3"},
		{"metadata.example.com", 443, "169.254.169.254"},
	} {
		d := pol.Check(c.host, c.port, netip.MustParseAddr(c.ip))
		if d.Allowed {
			fmt.Printf("%s:%d at %s: allowed by %s\n", c.host, c.port, c.ip, d.Rule)
		} else {
			fmt.Printf("%s:%d at %s: denied: %s\n", c.host, c.port, c.ip, d.Reason)
		}
	}

	_, err = egress.Parse([]string{"api.example.com", "10.0.0.0/33:443"})
	fmt.Println(errors.Is(err, egress.ErrInvalid))
	fmt.Println(err)
	// Output:
	// api.example.com:443 at 93.184.215.14: allowed by api.example.com:443
	// api.example.com:80 at 93.184.215.14: denied: api.example.com:80 (93.184.215.14) is on no allow-list entry
	// api.example.com:443 at 127.0.0.1: denied: api.example.com:443 resolves to 127.0.0.1, a loopback or private address no IP or CIDR entry lists
	// eu.pkg.example.org:443 at 93.184.215.15: allowed by *.pkg.example.org:443
	// db.internal:5432 at 10.1.2.3: allowed by 10.0.0.0/8:5432
	// metadata.example.com:443 at 169.254.169.254: denied: 169.254.169.254 is link-local (cloud metadata): never allowed
	// true
	// egress: invalid allow-list entry: allow[0] "api.example.com": want host:port, CIDR:port or *.domain:port
	// egress: invalid allow-list entry: allow[1] "10.0.0.0/33:443": bad CIDR: netip.ParsePrefix("10.0.0.0/33"): prefix length out of range
}

// names answers lookups from a map, as a DNS server would.
type names map[string]string

func (n names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, errors.New("no such host")
}

// The proxy resolves each destination once, checks the address and dials
// that address: a plain HTTP request to a listed origin goes through, one
// to the cloud metadata address is refused with 403 though its name is
// listed, and each attempt is recorded when it ends.
func ExampleProxy() {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from origin")
	}))
	defer origin.Close()
	port := origin.URL[strings.LastIndexByte(origin.URL, ':')+1:]

	pol, err := egress.Parse([]string{"127.0.0.1/32:" + port, "metadata.example.com:80"})
	if err != nil {
		log.Fatal(err)
	}
	attempts := make(chan egress.Attempt, 2)
	px := httptest.NewServer(&egress.Proxy{Policy: pol, Resolver: names{"metadata.example.com": "169.254.169.254"},
		Record: func(a egress.Attempt) { attempts <- a }})
	defer px.Close()
	pu, _ := url.Parse(px.URL)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}

	for _, u := range []string{origin.URL, "http://metadata.example.com/latest/meta-data/"} {
		resp, err := client.Get(u)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		a := <-attempts
		fmt.Printf("%d %q\n", resp.StatusCode, strings.TrimSpace(string(body)))
		fmt.Printf("  recorded: %s allowed=%v address=%s bytesIn>0=%v\n", a.Method, a.Allowed, a.Address, a.BytesIn > 0)
	}
	// Output:
	// 200 "hello from origin"
	//   recorded: GET allowed=true address=127.0.0.1 bytesIn>0=true
	// 403 "egress: denied: 169.254.169.254 is link-local (cloud metadata): never allowed"
	//   recorded: GET allowed=false address=169.254.169.254 bytesIn>0=false
}
