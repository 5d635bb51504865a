package controlapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to a control plane's API with one token.
type Client struct {
	base, token string
	http        *http.Client
}

// Option configures a Client.
type Option func(*options) error

type options struct {
	http *http.Client
}

// WithHTTPClient makes requests with hc (its transport and timeout)
// instead of a client with a one-minute timeout. Follow uses hc's
// transport without a timeout: a stream lasts.
func WithHTTPClient(hc *http.Client) Option {
	return func(o *options) error {
		if hc == nil {
			return fmt.Errorf("control: WithHTTPClient(nil)")
		}
		o.http = hc
		return nil
	}
}

// NewClient makes a client of the API at base (http://host:port).
func NewClient(base, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("control: server %q: want http(s)://host:port", base)
	}
	if token == "" {
		return nil, fmt.Errorf("control: a token is required")
	}
	o := options{http: &http.Client{Timeout: time.Minute}}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	return &Client{base: strings.TrimSuffix(base, "/"), token: token, http: o.http}, nil
}

func (c *Client) do(ctx context.Context, method, path string, hdr map[string]string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		e := &APIError{Status: resp.StatusCode}
		_ = json.Unmarshal(b, &e.Body)
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			e.RetryAfter = time.Duration(s) * time.Second
		}
		return resp.StatusCode, e
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("control plane: %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// Submit submits a job; created is false when the idempotency key named an
// existing job.
func (c *Client) Submit(ctx context.Context, s Spec) (*Job, bool, error) {
	var j Job
	code, err := c.do(ctx, http.MethodPost, "/v1/jobs", nil, s, &j)
	if err != nil {
		return nil, false, err
	}
	return &j, code == http.StatusCreated, nil
}

// Get returns a job.
func (c *Client) Get(ctx context.Context, id string) (*Job, error) {
	var j Job
	_, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, nil, &j)
	return &j, err
}

// Profile returns a job's profile as it was at the job's revision.
func (c *Client) Profile(ctx context.Context, id string) (*JobProfile, error) {
	var p JobProfile
	_, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/profile", nil, nil, &p)
	return &p, err
}

// List lists jobs.
func (c *Client) List(ctx context.Context, state State, limit int) ([]*Job, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", string(state))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct{ Jobs []*Job }
	path := "/v1/jobs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	_, err := c.do(ctx, http.MethodGet, path, nil, nil, &out)
	return out.Jobs, err
}

// Trace returns the spans of a job's trace the answering replica holds.
func (c *Client) Trace(ctx context.Context, id string) (*JobTrace, error) {
	var t JobTrace
	_, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/trace", nil, nil, &t)
	return &t, err
}

// Cancel cancels a job.
func (c *Client) Cancel(ctx context.Context, id string) (*Job, error) {
	var j Job
	_, err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/cancel", nil, nil, &j)
	return &j, err
}

// CancelWithReason cancels a job and records why (and the token that
// asked) in its cancellation record.
func (c *Client) CancelWithReason(ctx context.Context, id, reason string) (*Job, error) {
	var j Job
	_, err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/cancel", nil, CancelRequest{Reason: reason}, &j)
	return &j, err
}

// WhoAmI says what the client's token is: its id, tenant and scope.
func (c *Client) WhoAmI(ctx context.Context) (*WhoAmI, error) {
	var w WhoAmI
	_, err := c.do(ctx, http.MethodGet, "/v1/whoami", nil, nil, &w)
	return &w, err
}

// Wait polls a job until it is terminal (or unknown), calling seen with each
// new state.
func (c *Client) Wait(ctx context.Context, id string, every time.Duration, seen func(*Job)) (*Job, error) {
	var last State
	for {
		j, err := c.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if j.State != last && seen != nil {
			seen(j)
		}
		last = j.State
		if j.State.Terminal() || j.State == Unknown {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-time.After(every):
		}
	}
}
