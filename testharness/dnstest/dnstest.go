package dnstest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// Query is one question the server was asked.
type Query struct {
	Name string // as asked, lower-case, without the final dot
	Type string // "A", "AAAA" or another type's name
}

// Server is a running test DNS server.
type Server struct {
	// Addr is its UDP address, 127.0.0.1:port (or where ListenFunc put it).
	Addr string

	pc      net.PacketConn
	done    chan struct{}
	lookup  LookupFunc
	mu      sync.Mutex
	queries []Query
}

// Start runs a server answering each name of answers (a host name, any
// case, with or without its final dot) with its addresses, until the test
// ends.
func Start(tb testing.TB, answers map[string][]string) *Server {
	tb.Helper()
	s, err := Listen(answers)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// Listen is Start outside a test: the caller closes the server.
func Listen(answers map[string][]string) (*Server, error) {
	table := map[string][]netip.Addr{}
	for name, addrs := range answers {
		for _, a := range addrs {
			ip, err := netip.ParseAddr(a)
			if err != nil {
				return nil, fmt.Errorf("dnstest: answer for %s: %w", name, err)
			}
			table[canonical(name)] = append(table[canonical(name)], ip)
		}
	}
	return ListenFunc("127.0.0.1:0", func(name string) ([]netip.Addr, bool) {
		addrs, ok := table[name]
		return addrs, ok
	})
}

// LookupFunc answers for one name (lower-case, without the final dot): its
// addresses, and whether the name exists (false: NXDOMAIN). It is called
// for every question, from one goroutine at a time.
type LookupFunc func(name string) (addrs []netip.Addr, exists bool)

// ListenFunc runs a server on the UDP address addr (say the bridge of a
// test cluster's node, port 53, for its pods) answering each question
// from lookup, whose answers may change while it runs (a cluster's
// Services come and go). The caller closes the server.
func ListenFunc(addr string, lookup LookupFunc) (*Server, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("dnstest: listen on %s: %w", addr, err)
	}
	s := &Server{lookup: lookup, done: make(chan struct{}), pc: pc, Addr: pc.LocalAddr().String()}
	go func() { defer close(s.done); s.serve() }()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error {
	err := s.pc.Close()
	<-s.done
	return err
}

func canonical(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }

// Queries is every question asked so far, in order.
func (s *Server) Queries() []Query {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Query(nil), s.queries...)
}

// Resolver is a Go resolver (no cgo, no /etc/hosts bypass of the dial)
// that sends every query to s.
func (s *Server) Resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", s.Addr)
	}}
}

func (s *Server) serve() {
	buf := make([]byte, 4096)
	for {
		n, from, err := s.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if out, ok := s.answer(buf[:n]); ok {
			_, _ = s.pc.WriteTo(out, from)
		}
	}
}

// answer builds the reply to one query message.
func (s *Server) answer(msg []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	name := canonical(q.Name.String())
	s.mu.Lock()
	s.queries = append(s.queries, Query{Name: name, Type: strings.TrimPrefix(q.Type.String(), "Type")})
	s.mu.Unlock()
	addrs, known := s.lookup(name)
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	rr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}
	for _, ip := range addrs {
		switch {
		case q.Type == dnsmessage.TypeA && ip.Is4():
			err = b.AResource(rr, dnsmessage.AResource{A: ip.As4()})
		case q.Type == dnsmessage.TypeAAAA && ip.Is6():
			err = b.AAAAResource(rr, dnsmessage.AAAAResource{AAAA: ip.As16()})
		}
		if err != nil {
			return nil, false
		}
	}
	out, err := b.Finish()
	return out, err == nil
}
