package deliver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestFilterHostileOutput: ANSI and OSC escapes, a credential hidden by an
// escape, markup mentioning users, bidi overrides.
func TestFilterHostileOutput(t *testing.T) {
	tok := "gh" + "p_" + strings.Repeat("aB3dE5", 6)
	raw := "\x1b[31mred\x1b[0m \x1b]8;;https://evil.example\x07link\x1b]8;;\x07 \x1b]0;title\x1b\\" +
		"tok=gh\x1b[1mp_" + strings.Repeat("aB3dE5", 6) + "\n" +
		"<!channel> <@U024BE7LH> hi @alice and @here, mail a@b.c, <https://evil.example|click>\n" +
		"progress 10%\rprogress 99%\r\nbell\x07 nul\x00 c1\u009b31m bidi\u202egnp.exe\u202c\xff\n"
	got := Filter([]byte(raw), Limits{})
	want := "red link tok=[REDACTED github-token]\n" +
		"&lt;!channel&gt; &lt;@\u200bU024BE7LH&gt; hi @\u200balice and @\u200bhere, mail a@b.c, &lt;https://evil.example|click&gt;\n" +
		"progress 10%\nprogress 99%\nbell nul c131m bidignp.exe\uFFFD\n"
	if got.Text != want {
		t.Errorf("Filter:\n%q\nwant\n%q", got.Text, want)
	}
	if strings.Contains(got.Text, tok) || len(got.Redactions) != 1 || got.Truncated {
		t.Errorf("redactions %v, truncated %v", got.Redactions, got.Truncated)
	}
}

func TestFilterTruncates(t *testing.T) {
	lines := strings.Repeat("0123456789\n", 100)
	got := Filter([]byte(lines), Limits{MaxBytes: 1000, MaxLines: 10})
	if got.Text != strings.Repeat("0123456789\n", 10) || !got.Truncated || got.DroppedLines != 90 || got.DroppedBytes != 990 || got.Full != lines {
		t.Errorf("lines: %q dropped %d bytes %d lines", got.Text, got.DroppedBytes, got.DroppedLines)
	}
	long := strings.Repeat("é", 1000) // 2 bytes each, no newline
	got = Filter([]byte(long), Limits{MaxBytes: 101, MaxLines: 10})
	if got.Text != strings.Repeat("é", 50) || got.DroppedBytes != 1900 || got.DroppedLines != 1 {
		t.Errorf("bytes: %d bytes kept, dropped %d bytes %d lines", len(got.Text), got.DroppedBytes, got.DroppedLines)
	}
	if got := Filter([]byte("short\n"), Limits{}); got.Truncated || got.Full != "" || got.Text != "short\n" {
		t.Errorf("short: %+v", got)
	}
}

func TestSignVerify(t *testing.T) {
	secret, body, now := []byte("k"), []byte(`{"a":1}`), time.Unix(1700000000, 0)
	h := Sign(secret, now, body)
	if !strings.HasPrefix(h, "t=1700000000,v1=") || len(h) != len("t=1700000000,v1=")+64 {
		t.Fatalf("header %q", h)
	}
	if err := Verify(secret, h, body, time.Minute, now.Add(30*time.Second)); err != nil {
		t.Error(err)
	}
	for name, c := range map[string]struct {
		secret, body []byte
		header       string
		at           time.Time
	}{
		"other secret": {[]byte("x"), body, h, now},
		"other body":   {secret, []byte(`{"a":2}`), h, now},
		"too old":      {secret, body, h, now.Add(2 * time.Minute)},
		"malformed":    {secret, body, "v1=abc", now},
	} {
		if err := Verify(c.secret, c.header, c.body, time.Minute, c.at); !errors.Is(err, ErrSignature) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestPostOutcomes(t *testing.T) {
	var gotKey, gotSig string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey, gotSig = r.Header.Get(HeaderIdempotencyKey), r.Header.Get(HeaderSignature)
		_, _ = io.ReadAll(r.Body) // then the server sees the client go away
		switch r.URL.Path {
		case "/ok":
			_, _ = w.Write([]byte(`{"id":"m-1"}`))
		case "/num":
			_, _ = w.Write([]byte(`{"id":42}`))
		case "/slow":
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(429)
		case "/down":
			w.WriteHeader(503)
		case "/bad":
			w.WriteHeader(400)
		case "/hang":
			<-r.Context().Done()
		}
	}))
	defer srv.Close()
	post := func(p string) Outcome {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return Post(ctx, srv.Client(), srv.URL+p, Key("j-1", 3, "chat"), []byte("k"), []byte(`{}`), time.Now())
	}
	if o := post("/ok"); !o.Delivered || o.ID != "m-1" || o.Status != 200 || gotKey != "j-1:3:chat" || Verify([]byte("k"), gotSig, []byte(`{}`), time.Minute, time.Now()) != nil {
		t.Errorf("ok: %+v key %q", o, gotKey)
	}
	if o := post("/num"); o.ID != "42" {
		t.Errorf("numeric id: %+v", o)
	}
	if o := post("/slow"); o.Delivered || !o.Retry || o.RetryAfter != 7*time.Second {
		t.Errorf("429: %+v", o)
	}
	if o := post("/down"); !o.Retry || o.Status != 503 {
		t.Errorf("503: %+v", o)
	}
	if o := post("/bad"); o.Retry || o.Delivered || o.Err == nil {
		t.Errorf("400: %+v", o)
	}
	if o := post("/hang"); !o.Retry || o.Status != 0 || strings.Contains(o.Err.Error(), srv.URL) {
		t.Errorf("timeout: %+v", o)
	}
	if d := Backoff(10, 100*time.Millisecond, time.Second, 5*time.Second, 3*time.Second); d != 3*time.Second {
		t.Errorf("Backoff with Retry-After capped: %s", d)
	}
	if d := Backoff(3, 100*time.Millisecond, time.Second, 0, time.Minute); d < 200*time.Millisecond || d > 400*time.Millisecond {
		t.Errorf("Backoff(3): %s", d)
	}
}
