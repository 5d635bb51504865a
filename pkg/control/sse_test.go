package control

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
)

type sseFixture struct {
	p      *Plane
	s      *Store
	srv    *httptest.Server
	globex *controlapi.Client
	acme   *controlapi.Client
	tok    string
}

func newSSEFixture(t *testing.T, s *Store, ec EventConfig) *sseFixture {
	t.Helper()
	repo := configRepo(t)
	p := eventPlane(t, s, repo, ec)
	srv := httptest.NewUnstartedServer(NewServer(p))
	// a small send buffer, so a client that does not read blocks the
	// server's writes soon (the kernel's buffers would hide it for MBs)
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetWriteBuffer(16 << 10)
		}
		return ctx
	}
	srv.Start()
	t.Cleanup(srv.Close)
	ctx := context.Background()
	gt, _, _ := s.CreateToken(ctx, "globex", controlapi.ScopeTenant, "")
	at, _, _ := s.CreateToken(ctx, "acme", controlapi.ScopeTenant, "")
	g, _ := controlapi.NewClient(srv.URL, gt)
	a, _ := controlapi.NewClient(srv.URL, at)
	return &sseFixture{p: p, s: s, srv: srv, globex: g, acme: a, tok: gt}
}

func follow(t *testing.T, c *controlapi.Client, id string, o controlapi.FollowOptions) []controlapi.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []controlapi.Event
	if err := c.Follow(ctx, id, o, func(e controlapi.Event) error { got = append(got, e); return nil }); err != nil {
		t.Fatalf("follow %s after %d: %v", id, o.After, err)
	}
	return got
}

func wantSeqs(t *testing.T, what string, got []controlapi.Event, from, to int64) {
	t.Helper()
	if int64(len(got)) != to-from+1 {
		t.Fatalf("%s: %d events %v, want %d..%d", what, len(got), seqs(got), from, to)
	}
	for i, e := range got {
		if e.Seq != from+int64(i) {
			t.Fatalf("%s: event %d is %d, want %d (%v)", what, i, e.Seq, from+int64(i), seqs(got))
		}
	}
}

// TestSSEResumeEverySequence: resuming a finished job's stream from any
// sequence gives exactly the rest, ending with the result; another
// tenant's job is 404.
func TestSSEResumeEverySequence(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		f := newSSEFixture(t, s, EventConfig{})
		j := submitJob(t, f.p, "globex")
		for i := range 12 {
			evs := []store.NewEvent{outEvent(controlapi.KindStdout, fmt.Sprintf("line %d\n", i)), outEvent(controlapi.KindStderr, "\x1b[31mred\x1b[0m\n")}
			if _, err := s.inner.AppendEvents(ctx, j.ID, evs); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.p.Cancel(ctx, "globex", j.ID); err != nil {
			t.Fatal(err)
		}
		h, _ := allEvents(t, s, j.ID)
		if h.Last != 27 {
			t.Fatalf("head %+v", h)
		}
		for k := int64(0); k <= h.Last; k++ {
			got := follow(t, f.globex, j.ID, controlapi.FollowOptions{After: k})
			if k == h.Last {
				if len(got) != 0 {
					t.Fatalf("after the last: %v", seqs(got))
				}
				continue
			}
			wantSeqs(t, fmt.Sprintf("after %d", k), got, k+1, h.Last)
			if got[len(got)-1].Kind != controlapi.KindResult {
				t.Fatalf("after %d: last event %s", k, got[len(got)-1].Kind)
			}
		}
		// the wire: retry:, id: = sequence, Last-Event-ID before ?after=
		req, _ := http.NewRequest("GET", f.srv.URL+"/v1/jobs/"+j.ID+"/events?after=3", nil)
		req.Header.Set("Authorization", "Bearer "+f.tok)
		req.Header.Set("Last-Event-ID", "20")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.Header.Get("Content-Type") != "text/event-stream" || !strings.HasPrefix(string(body), "retry: 1000\n\nid: 21\nevent: stderr\ndata: {") ||
			!strings.Contains(string(body), "id: 27\nevent: result\n") {
			t.Fatalf("wire:\n%s", body)
		}
		for q, code := range map[string]int{"after=-1": 400, "after=x": 400, "since=3": 400} {
			req, _ := http.NewRequest("GET", f.srv.URL+"/v1/jobs/"+j.ID+"/events?"+q, nil)
			req.Header.Set("Authorization", "Bearer "+f.tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != code {
				t.Errorf("?%s: %d, want %d", q, resp.StatusCode, code)
			}
		}
		err = f.acme.Follow(ctx, j.ID, controlapi.FollowOptions{}, func(controlapi.Event) error { return nil })
		if ae, ok := err.(*controlapi.APIError); !ok || ae.Status != 404 {
			t.Fatalf("another tenant's stream: %v, want 404", err)
		}
	})
}

// TestSSETrimmed: a resume from a sequence retention trimmed gets the
// error event naming the gap, then what is kept.
func TestSSETrimmed(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		f := newSSEFixture(t, s, EventConfig{MaxBytesPerJob: 1000})
		j := submitJob(t, f.p, "globex")
		for i := range 30 {
			if _, err := s.inner.AppendEvents(ctx, j.ID, []store.NewEvent{outEvent(controlapi.KindStdout, fmt.Sprintf("%02d %080d\n", i, 0))}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.p.Cancel(ctx, "globex", j.ID); err != nil {
			t.Fatal(err)
		}
		h, kept := allEvents(t, s, j.ID)
		for _, from := range []int64{0, 1, h.TrimmedThrough - 1} {
			var gaps []controlapi.TrimmedData
			got := follow(t, f.globex, j.ID, controlapi.FollowOptions{After: from, OnGap: func(d controlapi.TrimmedData) { gaps = append(gaps, d) }})
			if len(gaps) != 1 || gaps[0].TrimmedThrough != h.TrimmedThrough || gaps[0].After != from || gaps[0].Error != "trimmed" ||
				!strings.Contains(gaps[0].Detail, "deleted by retention") {
				t.Fatalf("after %d: gaps %+v (head %+v)", from, gaps, h)
			}
			var want []controlapi.Event
			for _, e := range kept {
				if e.Seq > from {
					want = append(want, e)
				}
			}
			if fmt.Sprint(seqs(got)) != fmt.Sprint(seqs(want)) {
				t.Fatalf("after %d: %v, want %v", from, seqs(got), seqs(want))
			}
		}
		var gaps int
		got := follow(t, f.globex, j.ID, controlapi.FollowOptions{After: h.TrimmedThrough, OnGap: func(controlapi.TrimmedData) { gaps++ }})
		if gaps != 0 {
			t.Fatal("a gap reported after the trimmed range")
		}
		wantSeqs(t, "after the trimmed range", got, h.TrimmedThrough+1, h.Last)
	})
}

// TestSSELive: a follower connected before the events gets each within a
// wake-up (well under the poll interval), also when another store (on
// PostgreSQL: another replica, woken by NOTIFY) appends.
func TestSSELive(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		f := newSSEFixture(t, s, EventConfig{})
		j := submitJob(t, f.p, "globex")
		appender := s
		if s.inner.Dialect() == "postgres" {
			other, err := OpenPostgres(ctx, s.inner.DSN())
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			appender = other
		}
		arrived := make(chan controlapi.Event, 100)
		errc := make(chan error, 1)
		go func() {
			errc <- f.globex.Follow(ctx, j.ID, controlapi.FollowOptions{}, func(e controlapi.Event) error { arrived <- e; return nil })
		}()
		if e := <-arrived; e.Kind != controlapi.KindState {
			t.Fatalf("first event %+v", e)
		}
		time.Sleep(200 * time.Millisecond) // the follower waits
		for i := range 5 {
			start := time.Now()
			if _, err := appender.inner.AppendEvents(ctx, j.ID, []store.NewEvent{outEvent(controlapi.KindStdout, fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
			select {
			case e := <-arrived:
				if e.Seq != int64(i+2) {
					t.Fatalf("event %d has sequence %d", i, e.Seq)
				}
				if d := time.Since(start); d > time.Second {
					t.Errorf("event %d arrived after %s: no wake-up", i, d)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("event %d never arrived", i)
			}
		}
		if _, err := f.p.Cancel(ctx, "globex", j.ID); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if e := <-arrived; e.Kind != controlapi.KindState {
			t.Fatalf("after the output: %+v", e)
		}
		if e := <-arrived; e.Kind != controlapi.KindResult {
			t.Fatalf("the end: %+v", e)
		}
	})
}

// TestSSESlowClientDropped: a client that stops reading is dropped within
// SlowClient (the server neither waits for it nor buffers for it), and
// resumes with Last-Event-ID without a gap or a repeat.
func TestSSESlowClientDropped(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		f := newSSEFixture(t, s, EventConfig{SlowClient: 300 * time.Millisecond})
		j := submitJob(t, f.p, "globex")
		chunk := strings.Repeat("x", 8000) + "\n"
		for range 2 {
			batch := make([]store.NewEvent, 200)
			for i := range batch {
				batch[i] = outEvent(controlapi.KindStdout, chunk)
			}
			if _, err := s.inner.AppendEvents(ctx, j.ID, batch); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.p.Cancel(ctx, "globex", j.ID); err != nil {
			t.Fatal(err)
		}
		h, _ := allEvents(t, s, j.ID)

		u, _ := url.Parse(f.srv.URL)
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /v1/jobs/%s/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", j.ID, f.tok)
		time.Sleep(2 * time.Second) // not reading: far past SlowClient
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		raw, _ := io.ReadAll(bufio.NewReader(conn)) // what the kernel held, then the server's close
		t.Logf("read %d bytes in %s after the client stalled", len(raw), time.Since(start))
		if time.Since(start) > 9*time.Second {
			t.Fatal("the server kept the slow connection open")
		}
		var last int64
		for _, block := range strings.Split(string(raw), "\n\n") {
			if !strings.Contains(block, "\ndata: ") || !strings.HasSuffix(block, "}") {
				continue
			}
			for _, line := range strings.Split(block, "\n") {
				if id, ok := strings.CutPrefix(line, "id: "); ok {
					n, _ := strconv.ParseInt(id, 10, 64)
					if n != last+1 {
						t.Fatalf("before the drop: %d after %d", n, last)
					}
					last = n
				}
			}
		}
		if last >= h.Last || last == 0 {
			t.Fatalf("the slow client got through %d of %d: not dropped", last, h.Last)
		}
		got := follow(t, f.globex, j.ID, controlapi.FollowOptions{After: last})
		wantSeqs(t, "resumed", got, last+1, h.Last)
	})
}

// TestSSEOperatorFollows: an operator's requests are audited (through a
// wrapped ResponseWriter); its event stream must still flush and follow a
// tenant's job live, not end after the first write.
func TestSSEOperatorFollows(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		f := newSSEFixture(t, s, EventConfig{})
		j := submitJob(t, f.p, "globex")
		ot, _, err := s.CreateToken(ctx, "ops", controlapi.ScopeOperator, "")
		if err != nil {
			t.Fatal(err)
		}
		ops, _ := controlapi.NewClient(f.srv.URL, ot)
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		arrived := make(chan controlapi.Event, 100)
		errc := make(chan error, 1)
		go func() {
			errc <- ops.Follow(fctx, j.ID, controlapi.FollowOptions{OnReconnect: func(err error) {
				cancel()
				t.Errorf("the operator's stream broke off: %v", err)
			}}, func(e controlapi.Event) error { arrived <- e; return nil })
		}()
		select {
		case <-arrived:
		case err := <-errc:
			t.Fatalf("the stream ended before its first event: %v", err)
		}
		if _, err := s.inner.AppendEvents(ctx, j.ID, []store.NewEvent{outEvent(controlapi.KindStdout, "live")}); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-arrived:
			if e.Kind != controlapi.KindStdout {
				t.Fatalf("live event %+v", e)
			}
		case err := <-errc:
			t.Fatalf("the stream ended: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("the live event never arrived")
		}
		cancel()
		<-errc
	})
}
