package runtimeapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// TestQueryRoundTrip: the parameters Client.Query sends are the ones the
// server's ParseQuery reads back; the runner synonym and refusals.
func TestQueryRoundTrip(t *testing.T) {
	q := runmanifest.Query{Template: "sha256:t", RunnerImage: "sha256:r", RunnerBinary: "sha256:b", NodeImage: "ami-1", Node: "n-1",
		RuntimeClass: "gvisor", Policy: "p", SecretVersion: "vault://kv/a#3", Generation: "g-1", RequestKey: "k", Package: "openssl@3.0.7", Limit: 5}
	back, err := ParseQuery(QueryValues(q))
	if err != nil || back != q {
		t.Fatalf("ParseQuery(QueryValues(q)) = %+v, %v; want %+v", back, err, q)
	}
	if got, err := ParseQuery(url.Values{"runner": {"sha256:r"}}); err != nil || got.RunnerImage != "sha256:r" {
		t.Fatalf("runner synonym: %+v, %v", got, err)
	}
	for _, bad := range []url.Values{
		{"runner": {"a"}, "runner_image": {"b"}},
		{"template": {"a", "b"}},
		{"colour": {"red"}},
		{"limit": {"-1"}},
	} {
		if _, err := ParseQuery(bad); err == nil {
			t.Errorf("ParseQuery(%v) accepted", bad)
		}
	}
	if len(QueryParams) != len(queryFields(&runmanifest.Query{}))+2 {
		t.Errorf("QueryParams %v do not name every field, limit and the runner synonym", QueryParams)
	}
}

// TestClientErrors: an error answer becomes an *APIError with its status,
// code and reason; a 401 without a body is CodeUnauthorized; the token
// travels as a bearer token.
func TestClientErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(ErrorBody{Error: "runtime: fenced: the token is not the claim's current one", Code: CodeFenced})
	}))
	defer srv.Close()
	ctx := context.Background()
	c, _ := NewClient(srv.URL+"/", "tok")
	_, err := c.Exec(ctx, "r-1", ExecBody{Token: "old", Argv: []string{"true"}})
	var e *APIError
	if !errors.As(err, &e) || e.Status != http.StatusConflict || e.Code != CodeFenced || !strings.Contains(e.Reason, "fenced") {
		t.Fatalf("err = %#v", err)
	}
	bad, _ := NewClient(srv.URL, "wrong")
	if _, err := bad.Info(ctx); !IsCode(err, CodeUnauthorized) {
		t.Fatalf("a wrong token: %v", err)
	}
	for _, base := range []string{"", "127.0.0.1:7070", "ftp://x", "http://"} {
		if _, err := NewClient(base, "t"); err == nil {
			t.Errorf("NewClient(%q) accepted", base)
		}
	}
}

// TestClientForeignAnswer: an error answer without the runtime's JSON body
// (what a server that is not the runtime, or a router's 404, sends) says
// so and names the answering server, instead of a bare "404 Not Found".
func TestClientForeignAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "elsewhere")
		w.WriteHeader(http.StatusNotFound)
	}))
	defer srv.Close()
	c, _ := NewClient(srv.URL, "tok")
	_, err := c.Claim(context.Background(), "agents", ClaimBody{Tenant: "t"})
	var e *APIError
	if !errors.As(err, &e) || e.Status != http.StatusNotFound || e.Code != "" {
		t.Fatalf("err = %#v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "no JSON error body") || !strings.Contains(msg, `server "elsewhere"`) {
		t.Fatalf("err = %q: want it to say the answer has no JSON error body and name the server", msg)
	}
}

// TestExecStream: output frames reach onOutput in order, the exit ends the
// stream; an error frame is an APIError; a cut answer is ErrStreamCut.
func TestExecStream(t *testing.T) {
	var frames []ExecFrame
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b ExecBody
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil || !b.Stream || r.URL.EscapedPath() != "/v1/claims/r%2F1/exec" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		for _, f := range frames {
			_ = enc.Encode(f)
		}
	}))
	defer srv.Close()
	c, _ := NewClient(srv.URL, "tok")
	ctx := context.Background()

	frames = []ExecFrame{{Stream: StreamStdout, Data: []byte("a")}, {Stream: StreamStderr, Data: []byte("b")},
		{Stream: StreamStdout, Data: []byte("c")}, {Exit: &ExecResult{ExitCode: 3}}}
	var got []string
	res, err := c.ExecStream(ctx, "r/1", ExecBody{Token: "t", Argv: []string{"x"}}, func(s string, p []byte) { got = append(got, s+":"+string(p)) })
	if err != nil || res.ExitCode != 3 || !reflect.DeepEqual(got, []string{"stdout:a", "stderr:b", "stdout:c"}) {
		t.Fatalf("res %+v, err %v, output %v", res, err, got)
	}

	frames = []ExecFrame{{Stream: StreamStdout, Data: []byte("a")}, {Error: "moved", Code: CodeFenced, Status: http.StatusConflict}}
	if _, err := c.ExecStream(ctx, "r/1", ExecBody{}, func(string, []byte) {}); !IsCode(err, CodeFenced) {
		t.Fatalf("an error frame: %v", err)
	}
	frames = []ExecFrame{{Stream: StreamStdout, Data: []byte("a")}}
	if _, err := c.ExecStream(ctx, "r/1", ExecBody{}, func(string, []byte) {}); !errors.Is(err, ErrStreamCut) {
		t.Fatalf("a cut stream: %v", err)
	}
	frames = []ExecFrame{{Stream: "stdin"}}
	if _, err := c.ExecStream(ctx, "r/1", ExecBody{}, func(string, []byte) {}); err == nil || errors.Is(err, ErrStreamCut) {
		t.Fatalf("a frame of an unknown stream: %v", err)
	}
}

func TestProtocolRange(t *testing.T) {
	r := ProtocolRange{Min: 2, Max: 4}
	if !r.Contains(2) || !r.Contains(4) || r.Contains(5) || !r.Overlaps(ProtocolRange{Min: 4, Max: 9}) || r.Overlaps(ProtocolRange{Min: 5, Max: 9}) || r.String() != "2..4" {
		t.Fatal(r)
	}
}

// TestClientTraceParent: a context's traceparent travels in the
// traceparent header of every request, and none without one; Trace reads
// GET /v1/traces/{id}.
func TestClientTraceParent(t *testing.T) {
	got := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Method + " " + r.URL.Path + " " + r.Header.Get(HeaderTraceParent)
		_ = json.NewEncoder(w).Encode(TraceResult{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Spans: []Span{{Name: "claim"}}})
	}))
	defer srv.Close()
	c, _ := NewClient(srv.URL, "tok")
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := WithTraceParent(context.Background(), tp)
	if _, err := c.Claim(ctx, "agents", ClaimBody{}); err != nil {
		t.Fatal(err)
	}
	if g := <-got; g != "POST /v1/pools/agents/claims "+tp {
		t.Errorf("claim request: %q", g)
	}
	tr, err := c.Trace(context.Background(), "4bf92f3577b34da6a3ce929d0e0e4736")
	if err != nil || len(tr.Spans) != 1 || tr.Spans[0].Name != "claim" {
		t.Fatalf("Trace = %+v, %v", tr, err)
	}
	if g := <-got; g != "GET /v1/traces/4bf92f3577b34da6a3ce929d0e0e4736 " {
		t.Errorf("trace request without a traceparent: %q", g)
	}
}
