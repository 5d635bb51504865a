package deliver

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of an attempt.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderSignature      = "Slipway-Signature"
)

// Key is the idempotency key of the message of event seq of job to
// destination: the same on every attempt, so a receiver that saw it
// before can answer without acting twice.
func Key(job string, seq int64, destination string) string {
	return fmt.Sprintf("%s:%d:%s", job, seq, destination)
}

// Sign returns the signature header of body sent at t:
// t=<unix>,v1=<hex HMAC-SHA256(secret, "<unix>.<body>")>.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(secret, ts, body)
}

func mac(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// ErrSignature: a signature header that is missing, malformed, wrong or
// too old.
var ErrSignature = errors.New("deliver: bad signature")

// Verify checks a signature header against body: one of its v1 values
// must be the HMAC, and t within tolerance of now (replays refused).
func Verify(secret []byte, header string, body []byte, tolerance time.Duration, now time.Time) error {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%w: want t=<unix>,v1=<hex>", ErrSignature)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp %d is %s from now, over the tolerance of %s", ErrSignature, sec, d.Round(time.Second), tolerance)
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return fmt.Errorf("%w: no v1 signature matches", ErrSignature)
}

// Outcome is how one attempt ended.
type Outcome struct {
	// Status is the HTTP status (0: no answer).
	Status int
	// Delivered: a 2xx; ID is the id the destination returned (its body's
	// JSON "id", else its X-Message-Id header), if any.
	Delivered bool
	ID        string
	// Retry: a transient failure (no answer, a timeout, 408, 425, 429,
	// 5xx); RetryAfter is the destination's Retry-After, if it sent one.
	Retry      bool
	RetryAfter time.Duration
	// Err says what went wrong, without the URL's query or any secret.
	Err error
}

// maxAnswer bounds what is read of an answer.
const maxAnswer = 64 << 10

// Post sends one attempt of body to url with its idempotency key and
// signature. ctx bounds it (a timeout is a transient failure).
func Post(ctx context.Context, c *http.Client, url, key string, secret, body []byte, now time.Time) Outcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Outcome{Err: fmt.Errorf("deliver: request: %w", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "slipway-delivery/1")
	req.Header.Set(HeaderIdempotencyKey, key)
	req.Header.Set(HeaderSignature, Sign(secret, now, body))
	resp, err := c.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) {
			err = ue.Unwrap() // drop the URL *url.Error carries
		}
		return Outcome{Retry: true, Err: fmt.Errorf("deliver: no answer: %w", err)}
	}
	defer resp.Body.Close()
	ans, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	o := Outcome{Status: resp.StatusCode}
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		o.Delivered = true
		var v struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(ans, &v) == nil && len(v.ID) > 0 {
			var str string
			if json.Unmarshal(v.ID, &str) == nil {
				o.ID = str
			} else {
				o.ID = string(v.ID)
			}
		}
		if o.ID == "" {
			o.ID = resp.Header.Get("X-Message-Id")
		}
		if len(o.ID) > 256 {
			o.ID = o.ID[:256]
		}
		return o
	case s == http.StatusRequestTimeout, s == http.StatusTooEarly, s == http.StatusTooManyRequests, s >= 500:
		o.Retry = true
		o.RetryAfter = RetryAfter(resp.Header.Get("Retry-After"), now)
	}
	o.Err = fmt.Errorf("deliver: destination answered %s", resp.Status)
	return o
}

// RetryAfter reads a Retry-After header: seconds or an HTTP date (0 when
// absent or unreadable).
func RetryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Backoff is the wait before attempt n+1 after n failed attempts (n from
// 1): base doubled per attempt up to max, the upper half jittered, and at
// least the destination's Retry-After (itself capped at retryCap).
func Backoff(n int, base, max, retryAfter, retryCap time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	d = d/2 + rand.N(d/2+1)
	if ra := min(retryAfter, retryCap); ra > d {
		d = ra
	}
	return d
}
