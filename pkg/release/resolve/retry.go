package resolve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// RetryPolicy bounds how a registry request is retried on 408, 429, 5xx,
// timeouts and broken connections.
type RetryPolicy struct {
	// Attempts is the total number of attempts per request, first included.
	Attempts int
	// Base is the first backoff; each retry doubles it, with jitter.
	Base time.Duration
	// Max caps one backoff.
	Max time.Duration
	// MaxRetryAfter is the longest Retry-After honoured; a registry asking
	// for a longer wait gets its answer returned instead of a hang.
	MaxRetryAfter time.Duration
}

// DefaultRetryPolicy is the policy used unless WithRetry says otherwise.
var DefaultRetryPolicy = RetryPolicy{Attempts: 5, Base: 100 * time.Millisecond, Max: 5 * time.Second, MaxRetryAfter: time.Minute}

func (p RetryPolicy) validate() error {
	if p.Attempts < 1 {
		return fmt.Errorf("retry policy: attempts must be at least 1, got %d", p.Attempts)
	}
	if p.Base < 0 || p.Max < p.Base || p.MaxRetryAfter < 0 {
		return fmt.Errorf("retry policy: need 0 <= base <= max and max retry-after >= 0")
	}
	return nil
}

// retryTransport retries idempotent requests, honours Retry-After, and keeps
// one cool-down per host: after a 429 every request to that host waits, not
// only the one that was refused.
type retryTransport struct {
	inner  http.RoundTripper
	policy RetryPolicy

	mu        sync.Mutex
	notBefore map[string]time.Time
}

func newRetryTransport(inner http.RoundTripper, p RetryPolicy) *retryTransport {
	return &retryTransport{inner: inner, policy: p, notBefore: map[string]time.Time{}}
}

func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	idempotent := (req.Method == http.MethodGet || req.Method == http.MethodHead) && (req.Body == nil || req.Body == http.NoBody || req.GetBody != nil)
	for attempt := 1; ; attempt++ {
		if err := t.waitHost(ctx, req.URL.Host); err != nil {
			return nil, err
		}
		if attempt > 1 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(ctx)
			req.Body = body
		}
		resp, err := t.inner.RoundTrip(req)
		last := attempt >= t.policy.Attempts || !idempotent
		switch {
		case err != nil:
			if ctx.Err() != nil || !retryableErr(err) {
				return nil, err
			}
			if last {
				return nil, fmt.Errorf("%s %s: %w after %d attempt(s): %w", req.Method, req.URL.Redacted(), ErrUnavailable, attempt, err)
			}
			if err := sleep(ctx, t.backoff(attempt)); err != nil {
				return nil, err
			}
		case retryableStatus(resp.StatusCode) && !last:
			wait := t.backoff(attempt)
			if ra, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
				if ra > t.policy.MaxRetryAfter {
					return resp, nil // the registry's own answer says how long; do not hang on it
				}
				t.coolDown(req.URL.Host, ra)
				wait = ra + jitter(ra/10)
			} else if resp.StatusCode == http.StatusTooManyRequests {
				t.coolDown(req.URL.Host, wait)
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if err := sleep(ctx, wait); err != nil {
				return nil, err
			}
		default:
			return resp, nil
		}
	}
}

// backoff is exponential with equal jitter: half fixed, half random.
func (t *retryTransport) backoff(attempt int) time.Duration {
	d := t.policy.Base << (attempt - 1)
	if d > t.policy.Max || d <= 0 {
		d = t.policy.Max
	}
	return d/2 + jitter(d/2)
}

func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

func (t *retryTransport) coolDown(host string, d time.Duration) {
	until := time.Now().Add(d)
	t.mu.Lock()
	if until.After(t.notBefore[host]) {
		t.notBefore[host] = until
	}
	t.mu.Unlock()
}

func (t *retryTransport) waitHost(ctx context.Context, host string) error {
	t.mu.Lock()
	until := t.notBefore[host]
	t.mu.Unlock()
	if d := time.Until(until); d > 0 {
		return sleep(ctx, d)
	}
	return nil
}

// retryAfter parses a Retry-After value: delay-seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		d := at.Sub(now)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-tm.C:
		return nil
	}
}

// retryableErr says whether a transport error is worth another attempt:
// broken or refused connections and timeouts are; TLS and protocol errors
// (such as an HTTPS probe of a plain-HTTP registry) are not, and must fail
// fast so go-containerregistry's scheme fallback starts at once.
func retryableErr(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	}
	return false
}
