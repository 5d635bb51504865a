package egress

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"
)

// Attempt is one connection a sandbox asked the proxy for.
type Attempt struct {
	Time        time.Time `json:"time"`
	Method      string    `json:"method"`      // CONNECT or the plain-HTTP method
	Destination string    `json:"destination"` // host:port as asked
	Address     string    `json:"address,omitempty"`
	Allowed     bool      `json:"allowed"`
	Rule        string    `json:"rule,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	BytesOut    int64     `json:"bytesOut"` // sandbox to destination
	BytesIn     int64     `json:"bytesIn"`  // destination to sandbox
}

// Resolver looks names up: net.DefaultResolver (the host's resolver), or
// ResolverAt's resolver of one DNS server.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// ResolverAt is a resolver that sends every query to the DNS server at
// server (host:port, UDP, TCP for a truncated answer), with Go's own
// resolver: the host's /etc/hosts and search domains still apply, its
// nameservers do not.
func ResolverAt(server string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, server)
	}}
}

// Proxy is an HTTP proxy enforcing a Policy. Record is called once per
// attempt, when it ends (from the proxy's goroutines).
type Proxy struct {
	Policy *Policy
	// Resolver looks up the names the policy lists (net.DefaultResolver
	// when nil); a name the policy does not list is never looked up.
	Resolver Resolver
	Record   func(Attempt)
	// DialTimeout bounds each dial and each lookup (10s when 0).
	DialTimeout time.Duration
	// Dial connects to a checked address, "ip:port" (a net.Dialer when
	// nil).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

var _ http.Handler = (*Proxy)(nil)

// decide decides on the destination as asked (a name no entry lists is
// refused before any lookup), then resolves a listed name and checks every
// address it gets: a name with one forbidden address is refused, so that
// no answer order decides. The first address is the one dialled.
func (p *Proxy) decide(ctx context.Context, a *Attempt) (netip.Addr, bool) {
	host, port, err := splitHostPort(a.Destination)
	if err != nil {
		a.Reason = err.Error()
		return netip.Addr{}, false
	}
	pol := p.Policy
	if pol == nil {
		pol = &Policy{}
	}
	if d := pol.CheckName(host, port); !d.Allowed {
		a.Reason = d.Reason
		return netip.Addr{}, false
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		r := p.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		lctx, cancel := context.WithTimeout(ctx, p.timeout())
		addrs, err = r.LookupNetIP(lctx, "ip", host)
		cancel()
		if err != nil || len(addrs) == 0 {
			a.Reason = fmt.Sprintf("resolve %s: %v", host, cmp.Or(err, errors.New("no address")))
			return netip.Addr{}, false
		}
	}
	for _, ip := range addrs {
		d := pol.Check(host, port, ip)
		if !d.Allowed {
			a.Address, a.Reason = ip.Unmap().String(), d.Reason
			return netip.Addr{}, false
		}
		a.Rule = d.Rule
	}
	a.Address, a.Allowed = addrs[0].Unmap().String(), true
	return addrs[0].Unmap(), true
}

func (p *Proxy) timeout() time.Duration {
	if p.DialTimeout > 0 {
		return p.DialTimeout
	}
	return 10 * time.Second
}

func (p *Proxy) dial(ctx context.Context, ip netip.Addr, dest string) (net.Conn, error) {
	_, port, _ := splitHostPort(dest)
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(int(port)))
	ctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	if p.Dial != nil {
		return p.Dial(ctx, "tcp", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

func (p *Proxy) record(a Attempt) {
	if p.Record != nil {
		p.Record(a)
	}
}

// ServeHTTP handles CONNECT host:port and plain HTTP requests in proxy
// form (GET http://host/...).
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := Attempt{Time: time.Now().UTC(), Method: r.Method}
	if r.Method == http.MethodConnect {
		a.Destination = r.Host
		p.connect(w, r, &a)
		return
	}
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		http.Error(w, "egress: only CONNECT and absolute http:// requests are proxied", http.StatusBadRequest)
		return
	}
	a.Destination = r.URL.Host
	if r.URL.Port() == "" {
		a.Destination = net.JoinHostPort(r.URL.Hostname(), "80")
	}
	defer func() { p.record(a) }()
	ip, ok := p.decide(r.Context(), &a)
	if !ok {
		http.Error(w, "egress: denied: "+a.Reason, http.StatusForbidden)
		return
	}
	// One connection, written and read in this goroutine: when the
	// handler ends, nothing else counts its bytes any more.
	up, err := p.dial(r.Context(), ip, a.Destination)
	if err != nil {
		a.Reason = err.Error()
		http.Error(w, "egress: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer up.Close()
	stop := context.AfterFunc(r.Context(), func() { _ = up.Close() })
	defer stop()
	cc := &counted{Conn: up, out: &a.BytesOut, in: &a.BytesIn}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Close = true
	out.Header.Del("Proxy-Connection")
	out.Header.Del("Proxy-Authorization")
	if err := out.Write(cc); err != nil {
		a.Reason = err.Error()
		http.Error(w, "egress: "+err.Error(), http.StatusBadGateway)
		return
	}
	br := bufio.NewReaderSize(cc, copyBuffer)
	resp, err := http.ReadResponse(br, out)
	if err != nil {
		a.Reason = err.Error()
		http.Error(w, "egress: "+err.Error(), http.StatusBadGateway)
		return
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	// Through one large buffer, every byte counted as cc reads it: on
	// loopback a 256 KiB read and write carry more than the ResponseWriter's
	// splice through a pipe (benchmark B11's throughput half measures the
	// proxied download against a direct one).
	_, _ = io.CopyBuffer(writerOnly{w}, resp.Body, make([]byte, copyBuffer))
	_ = resp.Body.Close()
}

// writerOnly hides a ResponseWriter's ReadFrom from io.CopyBuffer.
type writerOnly struct{ io.Writer }

func (p *Proxy) connect(w http.ResponseWriter, r *http.Request, a *Attempt) {
	defer func() { p.record(*a) }()
	ip, ok := p.decide(r.Context(), a)
	if !ok {
		http.Error(w, "egress: denied: "+a.Reason, http.StatusForbidden)
		return
	}
	up, err := p.dial(r.Context(), ip, a.Destination)
	if err != nil {
		a.Reason = err.Error()
		http.Error(w, "egress: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer up.Close()
	hj, ok := w.(http.Hijacker)
	if !ok {
		a.Reason = "connection cannot be hijacked"
		http.Error(w, "egress: "+a.Reason, http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		a.Reason = err.Error()
		return
	}
	defer down.Close()
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{})
	// The request's context ends when a Serve stops: the tunnel ends with
	// it, so that every tunnel is recorded before Serve returns.
	stop := context.AfterFunc(r.Context(), func() { _ = up.Close(); _ = down.Close() })
	defer stop()
	go func() {
		n, _ := io.Copy(up, buf) // buffered bytes first, then the connection
		atomic.AddInt64(&a.BytesOut, n)
		if c, ok := up.(*net.TCPConn); ok {
			_ = c.CloseWrite()
		}
		close(done)
	}()
	n, _ := io.Copy(down, up)
	atomic.AddInt64(&a.BytesIn, n)
	if c, ok := down.(*net.TCPConn); ok {
		_ = c.CloseWrite()
	}
	<-done
}

// copyBuffer is the size of the buffers a plain-HTTP response is read
// and copied with: large reads keep the proxy near the speed of a direct
// download (B11).
const copyBuffer = 256 << 10

// counted counts the bytes through a connection.
type counted struct {
	net.Conn
	out, in *int64
}

func (c *counted) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	atomic.AddInt64(c.in, int64(n))
	return n, err
}

func (c *counted) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	atomic.AddInt64(c.out, int64(n))
	return n, err
}
