package runtime

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

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// Client speaks the runtime's HTTP API.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// NewClient talks to the runtime at base (http://host:port) with token.
func NewClient(base, token string) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("runtime: server %q is not an http(s) URL", base)
	}
	return &Client{base: strings.TrimSuffix(base, "/"), token: token, http: &http.Client{}}, nil
}

// APIError is an answer other than success, with the server's reason.
type APIError struct {
	Status int
	Reason string
}

func (e *APIError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("runtime: %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("runtime: %d %s: %s", e.Status, http.StatusText(e.Status), e.Reason)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Error string }
		_ = json.Unmarshal(b, &e)
		return &APIError{Status: resp.StatusCode, Reason: e.Error}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// Claim asks for a sandbox of pool.
func (c *Client) Claim(ctx context.Context, pool string, b ClaimBody) (*Grant, error) {
	var g Grant
	if err := c.do(ctx, http.MethodPost, "/v1/pools/"+url.PathEscape(pool)+"/claims", b, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// Exec runs a command in a claim.
func (c *Client) Exec(ctx context.Context, runID string, b ExecBody) (*ExecResult, error) {
	var r ExecResult
	if err := c.do(ctx, http.MethodPost, "/v1/claims/"+url.PathEscape(runID)+"/exec", b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Release ends a claim.
func (c *Client) Release(ctx context.Context, runID string, b ReleaseBody) error {
	return c.do(ctx, http.MethodPost, "/v1/claims/"+url.PathEscape(runID)+"/release", b, nil)
}

// Run returns a run manifest.
func (c *Client) Run(ctx context.Context, runID string) (*runmanifest.Manifest, error) {
	var m runmanifest.Manifest
	if err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID), nil, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Query lists the run ids matching q (see runs.Store's Query).
func (c *Client) Query(ctx context.Context, q runmanifest.Query) ([]string, error) {
	v := url.Values{}
	for k, val := range queryFields(&q) {
		if *val != "" {
			v.Set(k, *val)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out struct {
		Runs []string `json:"runs"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/runs?"+v.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return out.Runs, nil
}

// Policy returns the runtime's policy view (GET /v1/policy).
func (c *Client) Policy(ctx context.Context) (*PolicyView, error) {
	var v PolicyView
	if err := c.do(ctx, http.MethodGet, "/v1/policy", nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// CheckCredential asks the runtime's broker whether token is valid (POST
// /v1/credentials/check), as a provider does before it honours it: nil
// when it is, else the narrow reason, which never holds the token.
func (c *Client) CheckCredential(ctx context.Context, token string) error {
	return c.do(ctx, http.MethodPost, "/v1/credentials/check", CheckBody{Token: token}, nil)
}
