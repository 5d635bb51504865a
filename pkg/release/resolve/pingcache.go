package resolve

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"sync"
)

// NewPingCache returns a transport that answers registry pings ("GET /v2/")
// from the first answer per scheme and host, for its own lifetime. go-containerregistry pings
// once per repository to learn how the registry wants to be spoken to (the
// scheme, and the auth challenge); the answer is the registry's, not the
// repository's, so a session verifying many repositories of one registry
// need not ask again. Only 200 and 401 answers are kept (the two a ping
// expects), and the one error that says the port speaks plain HTTP to an
// https ping (so the https-then-http fallback is paid once); other errors
// and answers go through every time, so transient failures behave as before.
type pingCache struct {
	next http.RoundTripper

	mu   sync.Mutex
	seen map[string]*cachedPing
}

type cachedPing struct {
	status int
	header http.Header
	body   []byte
	err    error // an https ping answered in plain HTTP
}

// maxPingBody bounds what is kept of a ping's body (it is usually empty or
// a short JSON error).
const maxPingBody = 64 << 10

func NewPingCache(next http.RoundTripper) http.RoundTripper {
	return &pingCache{next: next, seen: map[string]*cachedPing{}}
}

func (p *pingCache) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.URL.Path != "/v2/" || req.Header.Get("Authorization") != "" {
		return p.next.RoundTrip(req)
	}
	key := req.URL.Scheme + "://" + req.URL.Host
	p.mu.Lock()
	c := p.seen[key]
	p.mu.Unlock()
	if c != nil && c.err != nil {
		return nil, c.err
	}
	if c != nil {
		return &http.Response{
			Status: http.StatusText(c.status), StatusCode: c.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: c.header.Clone(), Body: io.NopCloser(bytes.NewReader(c.body)), ContentLength: int64(len(c.body)), Request: req,
		}, nil
	}
	resp, err := p.next.RoundTrip(req)
	if plainHTTP(err) {
		// The registry speaks plain HTTP on this port: go-containerregistry
		// falls back to http, and need not try https again.
		p.mu.Lock()
		p.seen[key] = &cachedPing{err: err}
		p.mu.Unlock()
		return nil, err
	}
	if err != nil || (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusUnauthorized) {
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPingBody+1))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if len(body) <= maxPingBody {
		p.mu.Lock()
		p.seen[key] = &cachedPing{status: resp.StatusCode, header: resp.Header.Clone(), body: body}
		p.mu.Unlock()
	}
	return resp, nil
}

// plainHTTP reports the error of a TLS client answered in plain HTTP (what
// http.Client reports as ErrSchemeMismatch).
func plainHTTP(err error) bool {
	if errors.Is(err, http.ErrSchemeMismatch) {
		return true
	}
	var re tls.RecordHeaderError
	return errors.As(err, &re) && string(re.RecordHeader[:]) == "HTTP/"
}
