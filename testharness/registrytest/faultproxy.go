package registrytest

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"
)

// MaxIdleConnsPerHost is how many idle connections a FaultProxy keeps to its
// target, enough that high concurrency reuses connections instead of
// churning them.
const MaxIdleConnsPerHost = 256

// Request is one request a FaultProxy saw.
type Request struct {
	// Method and Path are the request's method and URL path.
	Method, Path string
	// At is when the request arrived.
	At time.Time
	// Status is the code sent to the client, 0 when the connection was reset
	// or the client left before an answer.
	Status int
}

// FaultProxy is a reverse proxy on 127.0.0.1 in front of a registry that
// delays requests and answers some of them with faults, and counts what it
// saw. It keeps the client's Host header, so the Location headers a registry
// sends point back at the proxy and uploads go through it too. All methods
// are safe for concurrent use.
type FaultProxy struct {
	addr      string
	server    *http.Server
	proxy     *httputil.ReverseProxy
	transport *http.Transport
	done      chan struct{} // closed by Close, ends hangs
	handlers  sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	latency  time.Duration
	rules    []*rule
	requests int
	faults   int
	inFlight int
	peak     int
	log      []Request
}

// rule is an injected Rule and how many requests it has served.
type rule struct {
	Rule
	used int
}

// NewFaultProxy starts a proxy to target, a base URL such as
// "http://127.0.0.1:5000", listening on a free port of 127.0.0.1.
// Stop it with Close.
func NewFaultProxy(target string) (*FaultProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("parse proxy target %q: %w", target, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("proxy target %q: want an http or https base URL", target)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for fault proxy: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConns = 0 // no overall limit
	tr.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	p := &FaultProxy{
		addr:      l.Addr().String(),
		transport: tr,
		done:      make(chan struct{}),
	}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host
		},
		Transport:    tr,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	}
	p.server = &http.Server{Handler: http.HandlerFunc(p.serveHTTP), ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = p.server.Serve(l) }()
	return p, nil
}

// StartFaultProxy starts a proxy to target for a test and closes it when the
// test and its subtests complete. It calls tb.Fatalf if the proxy does not start.
func StartFaultProxy(tb testing.TB, target string) *FaultProxy {
	tb.Helper()
	p, err := NewFaultProxy(target)
	if err != nil {
		tb.Fatalf("start fault proxy: %v", err)
	}
	tb.Cleanup(p.Close)
	return p
}

// Addr returns the proxy's host and port, "127.0.0.1:port"; use it as the
// registry in image references to go through the proxy.
func (p *FaultProxy) Addr() string { return p.addr }

// URL returns the proxy's base URL, "http://127.0.0.1:port".
func (p *FaultProxy) URL() string { return "http://" + p.addr }

// Close stops the proxy: it closes the listener and every connection, ends
// hanging requests and waits for the requests in flight to return. It is safe
// to call more than once.
func (p *FaultProxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.done)
	p.mu.Unlock()
	_ = p.server.Close()
	p.handlers.Wait()
	p.transport.CloseIdleConnections()
}

// SetLatency delays every request by d before it is faulted or forwarded; 0
// turns the delay off. A client that gives up during the delay is not forwarded.
func (p *FaultProxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

// Inject adds a fault rule after those already injected.
func (p *FaultProxy) Inject(r Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, &rule{Rule: r})
}

// ClearFaults removes every fault rule; latency stays as it is.
func (p *FaultProxy) ClearFaults() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// Requests returns how many requests arrived since the start or ResetStats.
func (p *FaultProxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}

// Faults returns how many faults were served since the start or ResetStats.
// A hang counts once it ends.
func (p *FaultProxy) Faults() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults
}

// PeakInFlight returns the highest number of requests in flight at once since
// the start or ResetStats, counting each from its arrival to the end of its
// answer, latency included.
func (p *FaultProxy) PeakInFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

// Log returns a copy of the requests answered since the start or ResetStats,
// in the order their answers were decided: a request is logged with its
// status just before the status line is sent or the connection reset, so a
// client that saw an answer finds its request here. Requests not yet
// answered (delayed, hanging, or waiting for the registry) are not in it yet.
func (p *FaultProxy) Log() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.log...)
}

// ResetStats zeroes the counters and empties the log. The peak restarts from
// the requests in flight now. Rules and their use counts are kept.
func (p *FaultProxy) ResetStats() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests, p.faults, p.peak, p.log = 0, 0, p.inFlight, nil
}

func (p *FaultProxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		resetConn(w, func(int) {})
		return
	}
	p.handlers.Add(1)
	p.requests++
	p.inFlight++
	p.peak = max(p.peak, p.inFlight)
	latency := p.latency
	p.mu.Unlock()

	x := &exchange{p: p, entry: Request{Method: r.Method, Path: r.URL.Path, At: at}}
	defer func() {
		x.record(0) // no answer: the client or the proxy went away
		p.mu.Lock()
		p.inFlight--
		p.mu.Unlock()
		p.handlers.Done()
	}()

	if !sleep(r, latency, p.done) {
		return
	}
	if f, ok := p.match(r); ok {
		x.faulted = true
		f.serve(w, r, p.done, x.record)
		return
	}
	p.proxy.ServeHTTP(&statusWriter{ResponseWriter: w, record: x.record}, r)
}

// exchange is one request on its way through the proxy.
type exchange struct {
	p        *FaultProxy
	entry    Request
	faulted  bool
	recorded bool
}

// record logs the request with the status its client gets, once, before the
// client can see that status: a test that saw an answer finds it in the stats.
func (x *exchange) record(status int) {
	if x.recorded {
		return
	}
	x.recorded = true
	x.entry.Status = status
	x.p.mu.Lock()
	defer x.p.mu.Unlock()
	if x.faulted {
		x.p.faults++
	}
	x.p.log = append(x.p.log, x.entry)
}

// match returns the fault of the first rule that matches r and uses it once.
func (p *FaultProxy) match(r *http.Request) (Fault, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ru := range p.rules {
		if ru.Times > 0 && ru.used >= ru.Times || !ru.matches(r) {
			continue
		}
		ru.used++
		return ru.Fault, ru.Fault.kind != faultNone
	}
	return Fault{}, false
}

// sleep waits d and reports whether the request should go on: false when the
// client gave up or the proxy closed first.
func sleep(r *http.Request, d time.Duration, done <-chan struct{}) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-done:
		return false
	}
}

// statusWriter records the status code written through it before sending it.
type statusWriter struct {
	http.ResponseWriter
	record func(status int)
}

func (w *statusWriter) WriteHeader(code int) {
	if code >= 200 {
		w.record(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.record(http.StatusOK) // no effect after WriteHeader
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the server's writer to flush.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
