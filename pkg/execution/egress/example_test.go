package egress_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/slipway-dev/slipway/pkg/execution/egress"
	"github.com/slipway-dev/slipway/testharness/dnstest"
)

// A pool's network.allow entries parsed into a Policy. CheckName decides
// on a destination as asked, before any lookup: a name no name entry lists
// is refused unresolved. Check then decides on each address a listed name
// resolved to: a name entry reaches public addresses only (so a name
// rebound to loopback is refused), a CIDR entry lists private ones beside
// it, and link-local (cloud metadata) is never allowed.
func ExamplePolicy_Check() {
	pol, err := egress.Parse([]string{"api.example.com:443", "*.pkg.example.org:443", "db.internal:5432", "10.0.0.0/8:5432"})
	if err != nil {
		log.Fatal(err)
	}
	for _, dest := range []string{"api.example.com:443", "bWFkZSB5b3UgbG9vaw.attacker.example:443"} {
		host, port, _ := strings.Cut(dest, ":")
		p, _ := strconv.ParseUint(port, 10, 16)
		d := pol.CheckName(host, uint16(p))
		fmt.Println(strings.TrimSpace(fmt.Sprintf("%s: look up=%v %s", dest, d.Allowed, d.Reason)))
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
		{"db.internal", 5432, "192.168.1.3"},
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
	// api.example.com:443: look up=true
	// bWFkZSB5b3UgbG9vaw.attacker.example:443: look up=false bWFkZSB5b3UgbG9vaw.attacker.example:443 is on no allow-list entry (not looked up)
	// api.example.com:443 at 93.184.215.14: allowed by api.example.com:443
	// api.example.com:80 at 93.184.215.14: denied: api.example.com:80 is on no allow-list entry (not looked up)
	// api.example.com:443 at 127.0.0.1: denied: api.example.com:443 resolves to 127.0.0.1, a loopback or private address no IP or CIDR entry lists
	// eu.pkg.example.org:443 at 93.184.215.15: allowed by *.pkg.example.org:443
	// db.internal:5432 at 10.1.2.3: allowed by 10.0.0.0/8:5432
	// db.internal:5432 at 192.168.1.3: denied: db.internal:5432 resolves to 192.168.1.3, a loopback or private address no IP or CIDR entry lists
	// metadata.example.com:443 at 169.254.169.254: denied: 169.254.169.254 is link-local (cloud metadata): never allowed
	// true
	// egress: invalid allow-list entry: allow[0] "api.example.com": want host:port, CIDR:port or *.domain:port
	// egress: invalid allow-list entry: allow[1] "10.0.0.0/33:443": bad CIDR: netip.ParsePrefix("10.0.0.0/33"): prefix length out of range
}

// The proxy looks up only the names the policy lists, at the resolver it
// is given (here a DNS server on loopback), checks every address and dials
// the one it checked: a plain HTTP request to a listed origin goes
// through, one to a listed name that resolves to the cloud metadata
// address is refused with 403, and each attempt is recorded when it ends.
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
	dns, err := dnstest.Listen(map[string][]string{"metadata.example.com": {"169.254.169.254"}})
	if err != nil {
		log.Fatal(err)
	}
	defer dns.Close()
	px := httptest.NewServer(&egress.Proxy{Policy: pol, Resolver: egress.ResolverAt(dns.Addr),
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
