package runtime

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/slipway-dev/slipway/internal/apierror"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// Runtime replicas that share one run store each hold the claims they
// granted in memory. A request about a claim (POST /v1/claims/{run}/...)
// that reaches a replica not holding it (a Service routed it there: the
// holder is stopping and left the Service, or the client's affinity
// moved) is passed on to the replica that does, at the address the run
// manifest records for it (served_by.runtime.address, WithAddress), with
// the same authentication; the answer, streamed or not, comes back as the
// holder gave it. A request passed on once is never passed on again
// (runtimeapi.HeaderForwarded), so two replicas cannot bounce it.

// WithAddress is where other replicas reach this runtime's API (host:port,
// a pod's address), recorded in the manifests of the claims it grants as
// served_by.runtime.address; it makes the Server pass requests about
// claims another replica holds on to it. "" (the default): nothing is
// recorded or passed on, as on one host.
func WithAddress(addr string) RuntimeOption {
	return func(o *runtimeOptions) { o.address = addr }
}

// forwardTransport carries the requests passed on; one for all, so the
// connections to the other replicas are kept.
var forwardTransport = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8, ForceAttemptHTTP2: false}

// forward passes r on to the replica holding its claim and reports true
// when it did (the answer is written); false leaves r to this replica.
func (s *Server) forward(w http.ResponseWriter, r *http.Request) bool {
	if s.rt == nil || s.rt.o.address == "" || r.Header.Get(runtimeapi.HeaderForwarded) != "" {
		return false
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/claims/")
	if !ok {
		return false
	}
	run, _, ok := strings.Cut(rest, "/")
	if !ok || run == "" || s.rt.Holds(run) || !s.authorized(r) {
		return false // held here, or not a claim's request: this replica answers
	}
	addr := s.holder(r.Context(), run)
	if addr == "" || addr == s.rt.o.address {
		return false
	}
	s.passOn(w, r, run, addr)
	return true
}

// passOnClaim passes claim request r, whose body was b, on to the replica
// at he.addr holding the claim of b's request key (a retry that a Service
// routed to another replica than the first attempt's), and reports true
// when it did; a request passed on once is not passed on again, and gets
// the refusal instead.
func (s *Server) passOnClaim(w http.ResponseWriter, r *http.Request, b runtimeapi.ClaimBody, err error) bool {
	var he *heldElsewhere
	if !errors.As(err, &he) || r.Header.Get(runtimeapi.HeaderForwarded) != "" {
		return false
	}
	raw, merr := json.Marshal(b)
	if merr != nil {
		return false
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
	r.Header.Del("Content-Length")
	s.passOn(w, r, he.run, he.addr)
	return true
}

// passOn passes r, about run's claim, on to the replica at addr with the
// same authentication and streams its answer back.
func (s *Server) passOn(w http.ResponseWriter, r *http.Request, run, addr string) {
	self := s.rt.o.address
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: addr})
			pr.Out.Header.Set(runtimeapi.HeaderForwarded, self)
		},
		Transport:     forwardTransport,
		FlushInterval: -1, // a streamed exec's frames as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.logf("runtime: run %s: passing %s %s on to the replica holding it at %s: %v", run, r.Method, r.URL.Path, addr, err)
			s.writeError(w, r, http.StatusBadGateway, apierror.Public("the runtime replica holding claim "+run+" does not answer", err))
		},
	}
	s.rt.logf("runtime: run %s: %s %s passed on to the replica holding it at %s", run, r.Method, r.URL.Path, addr)
	p.ServeHTTP(w, r)
}

// holder is the address of the replica the run store says holds run's
// open claim: "" when it is not open, not known, or names no address.
func (s *Server) holder(ctx context.Context, run string) string {
	m, err := s.rt.store.Get(ctx, run)
	if err != nil || m.Status.Final() || m.ServedBy.Runtime == nil {
		return ""
	}
	return m.ServedBy.Runtime.Address
}

// authorized says whether r carries the API's bearer token (auth answers
// 401 to the others; nothing is passed on without it).
func (s *Server) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), s.token) == 1
}
