package runtimeapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
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

// maxAnswer bounds a buffered answer the client reads.
const maxAnswer = 64 << 20

func (c *Client) request(ctx context.Context, method, path string, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	if tp := TraceParentOf(ctx); tp != "" {
		req.Header.Set(HeaderTraceParent, tp)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	return resp, nil
}

// apiError reads an error answer's body into an *APIError.
func apiError(resp *http.Response, limit int64) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, limit))
	var e ErrorBody
	_ = json.Unmarshal(b, &e)
	if e.Code == "" && resp.StatusCode == http.StatusUnauthorized {
		e.Code = CodeUnauthorized
	}
	if e.Error == "" && resp.StatusCode != http.StatusUnauthorized {
		// Every other error a runtime's handlers send has a JSON body with
		// its reason: this one came from its router (a path an older
		// runtime does not serve) or from something else at the address
		// (a proxy, another server, a Service IP routed off the cluster).
		e.Error = "no JSON error body: a path this runtime does not serve, or not a Slipway runtime at this address"
		if s := resp.Header.Get("Server"); s != "" {
			e.Error += fmt.Sprintf(" (server %q)", s)
		}
	}
	return &APIError{Status: resp.StatusCode, Code: e.Code, Reason: e.Error, ID: e.ID, RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	resp, err := c.request(ctx, method, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return apiError(resp, maxAnswer)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("runtime: %w", err)
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

// ExecStream runs a command in a claim with its output streamed as it is
// produced: onOutput gets each chunk (stream is StreamStdout or
// StreamStderr) in order, then ExecStream returns the exit (ExecResult
// without output). An answer cut before its exit is ErrStreamCut.
func (c *Client) ExecStream(ctx context.Context, runID string, b ExecBody, onOutput func(stream string, p []byte)) (*ExecResult, error) {
	return c.ExecStreamEvents(ctx, runID, b, onOutput, nil)
}

// ExecStreamEvents is ExecStream with the command's events: onEvent, when
// not nil, gets each (ExecBody.Events), in order with the output.
func (c *Client) ExecStreamEvents(ctx context.Context, runID string, b ExecBody, onOutput func(stream string, p []byte), onEvent func(WorkloadEvent)) (*ExecResult, error) {
	b.Stream, b.Events = true, onEvent != nil
	resp, err := c.request(ctx, http.MethodPost, "/v1/claims/"+url.PathEscape(runID)+"/exec", b)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, apiError(resp, 1<<20)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), MaxFrameBytes)
	for sc.Scan() {
		var f ExecFrame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			return nil, fmt.Errorf("runtime: exec %s: frame: %w", runID, err)
		}
		switch {
		case f.Exit != nil:
			return f.Exit, nil
		case f.Error != "":
			return nil, &APIError{Status: f.Status, Code: f.Code, Reason: f.Error, ID: f.ErrorID}
		case f.Event != nil && onEvent != nil:
			onEvent(*f.Event)
		case f.Stream == StreamStdout || f.Stream == StreamStderr:
			onOutput(f.Stream, f.Data)
		default:
			return nil, fmt.Errorf("runtime: exec %s: a frame of stream %q", runID, f.Stream)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStreamCut, err)
	}
	return nil, ErrStreamCut
}

// Release ends a claim.
func (c *Client) Release(ctx context.Context, runID string, b ReleaseBody) error {
	return c.do(ctx, http.MethodPost, "/v1/claims/"+url.PathEscape(runID)+"/release", b, nil)
}

// Identity asks the runner of a claim who it is (POST
// /v1/claims/{run}/identity).
func (c *Client) Identity(ctx context.Context, runID, token string) (*ClaimIdentity, error) {
	var id ClaimIdentity
	if err := c.do(ctx, http.MethodPost, "/v1/claims/"+url.PathEscape(runID)+"/identity", IdentityBody{Token: token}, &id); err != nil {
		return nil, err
	}
	return &id, nil
}

// Run returns a run manifest.
func (c *Client) Run(ctx context.Context, runID string) (*runmanifest.Manifest, error) {
	var m runmanifest.Manifest
	if err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID), nil, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Query lists the run ids matching q (GET /v1/runs; a query with no
// criterion is refused).
func (c *Client) Query(ctx context.Context, q runmanifest.Query) ([]string, error) {
	var out RunsResult
	if err := c.do(ctx, http.MethodGet, "/v1/runs?"+QueryValues(q).Encode(), nil, &out); err != nil {
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

// Info returns GET /v1/info.
func (c *Client) Info(ctx context.Context) (*Info, error) {
	var out Info
	if err := c.do(ctx, http.MethodGet, "/v1/info", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Sync asks the runtime to read the config repository now and returns the
// revision it serves from.
func (c *Client) Sync(ctx context.Context) (string, error) {
	var out SyncResult
	if err := c.do(ctx, http.MethodPost, "/v1/sync", nil, &out); err != nil {
		return "", err
	}
	return out.ObservedRevision, nil
}

// PoolStatus returns GET /v1/pools/{pool}.
func (c *Client) PoolStatus(ctx context.Context, pool string) (*PoolStatus, error) {
	var out PoolStatus
	if err := c.do(ctx, http.MethodGet, "/v1/pools/"+url.PathEscape(pool), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Prove runs proof checks on a proof claim of req.Generation.
func (c *Client) Prove(ctx context.Context, pool string, req ProofRequest) (*ProofResult, error) {
	var out ProofResult
	if err := c.do(ctx, http.MethodPost, "/v1/pools/"+url.PathEscape(pool)+"/proofs", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Stop ends the open claims of a generation of pool.
func (c *Client) Stop(ctx context.Context, pool, gen string) (*StopResult, error) {
	var out StopResult
	if err := c.do(ctx, http.MethodPost, "/v1/pools/"+url.PathEscape(pool)+"/generations/"+url.PathEscape(gen)+"/stop", struct{}{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
