package control

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/tenancy"
	"github.com/slipway-dev/slipway/pkg/control/deliver"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
)

// receiver is a real webhook destination: it verifies signatures, counts
// arrivals per idempotency key and acts on a message once (the first
// arrival of its key); script picks what it does on the nth arrival of a
// key: "ok", "500", "429" (Retry-After: 1), "timeout" (acts, then answers
// too late), "drop" (acts, then closes the connection unanswered).
type receiver struct {
	t      testing.TB
	secret []byte
	srv    *httptest.Server
	script func(m controlapi.Message, n int) string
	// hold runs for "hold": acts, then waits in it before dropping the
	// connection unanswered.
	hold func()
	// locked: script runs under mu (a script with state of its own)
	locked bool

	mu       sync.Mutex
	arrivals map[string]int
	effects  map[string]controlapi.Message
	order    map[string][]int64 // job -> sequences in the order acted on
	dups     int
}

func newReceiver(t testing.TB, secret string, script func(controlapi.Message, int) string) *receiver {
	r := &receiver{t: t, secret: []byte(secret), script: script, arrivals: map[string]int{}, effects: map[string]controlapi.Message{}, order: map[string][]int64{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if err := deliver.Verify(r.secret, req.Header.Get(deliver.HeaderSignature), body, time.Minute, time.Now()); err != nil {
		r.t.Errorf("receiver: %v", err)
		w.WriteHeader(401)
		return
	}
	var m controlapi.Message
	if err := json.Unmarshal(body, &m); err != nil || m.ID != req.Header.Get(deliver.HeaderIdempotencyKey) {
		r.t.Errorf("receiver: body %s, key %q: %v", body, req.Header.Get(deliver.HeaderIdempotencyKey), err)
		w.WriteHeader(400)
		return
	}
	r.mu.Lock()
	r.arrivals[m.ID]++
	n := r.arrivals[m.ID]
	what := ""
	if r.locked {
		what = r.script(m, n)
	}
	r.mu.Unlock()
	if !r.locked {
		what = r.script(m, n)
	}
	act := func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, seen := r.effects[m.ID]; seen {
			r.dups++ // deduplicated by the key: no second effect
			return
		}
		r.effects[m.ID] = m
		r.order[m.Job] = append(r.order[m.Job], m.Seq)
	}
	switch what {
	case "500":
		w.WriteHeader(500)
	case "429":
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(429)
	case "timeout":
		act()
		time.Sleep(time.Second)
		_, _ = w.Write([]byte(`{"id":"late"}`))
	case "hold":
		act()
		r.hold()
		fallthrough
	case "drop":
		if what == "drop" {
			act()
		}
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	default:
		act()
		_, _ = fmt.Fprintf(w, `{"id":"r-%s"}`, m.ID)
	}
}

func (r *receiver) snapshot() (map[string]controlapi.Message, map[string][]int64, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.effects), mapsl(r.order), r.dups
}

func mapsl(m map[string][]int64) map[string][]int64 {
	out := map[string][]int64{}
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}

// tenantWith is a tenant file with destinations.
func tenantWith(name, destinations string) string {
	return "apiVersion: slipway.dev/v1alpha1\nkind: Tenant\nname: " + name +
		"\npools: [agents]\nprofiles: [standard]\nconcurrency: 2\nqueueBound: 1000\ndestinations:\n" + destinations
}

func secretFile(t *testing.T, secret string) string {
	p := filepath.Join(t.TempDir(), "hook.key")
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func testDelivery() DeliveryConfig {
	return DeliveryConfig{Poll: 20 * time.Millisecond, Lease: 2 * time.Second, AttemptTimeout: 300 * time.Millisecond,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond, RetryAfterCap: 2 * time.Second,
		Limits: deliver.Limits{MaxBytes: 300, MaxLines: 5}}
}

func finishJob(t *testing.T, s *Store, id, output string) {
	t.Helper()
	if _, err := s.inner.Update(context.Background(), id, func(j *controlapi.Job, l *store.Lease) error {
		j.State, j.Reason, j.Output, j.EndedAt = controlapi.Succeeded, "exit_code", output, tp(time.Now())
		j.ExitCode = new(int)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !ok() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDeliveryFaultsAndFiltering: a receiver that answers 500, 429 with
// Retry-After, too late, or drops the connection after acting gets every
// wanted event of two jobs acted on once, in order per job, with receipts
// stored before the acknowledgement; a destination that is down does not
// hold the others back and ends "notification failed"; hostile output
// arrives cleaned, redacted and escaped; a product event cannot pick its
// destination; long output goes to an artifact of the job's tenant.
func TestDeliveryFaultsAndFiltering(t *testing.T) {
	repo := configRepo(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	faults := map[int64][]string{2: {"500", "ok"}, 3: {"429", "ok"}, 5: {"timeout", "ok"}, 6: {"500", "drop", "500", "ok"}, 9: {"drop", "ok"}}
	chat := newReceiver(t, "chat-secret", func(m controlapi.Message, n int) string {
		if f := faults[m.Seq]; m.Job != "" && n <= len(f) {
			return f[n-1]
		}
		return "ok"
	})
	down := newReceiver(t, "down-secret", func(controlapi.Message, int) string { return "500" })
	t.Setenv("SLIPWAY_TEST_DOWN_KEY", "down-secret")
	commit(t, repo, "destinations", func(tr *gitops.Tree) error {
		if err := tr.WriteFile("tenants/hooked.yaml", []byte(tenantWith("hooked",
			"  - {name: chat, url: '"+chat.srv.URL+"/in', kinds: [stdout, status, product, result], requiresResult: true, secretRef: {file: "+secretFile(t, "chat-secret")+"}, ratePerSecond: 200, maxAttempts: 6}\n"))); err != nil {
			return err
		}
		return tr.WriteFile("tenants/broken.yaml", []byte(tenantWith("broken",
			"  - {name: chat, url: '"+chat.srv.URL+"/in', kinds: [stdout], secretRef: {file: "+secretFile(t, "chat-secret")+"}}\n"+
				"  - {name: down, url: '"+down.srv.URL+"/in', kinds: [stdout, result], requiresResult: true, secretRef: {env: SLIPWAY_TEST_DOWN_KEY}, maxAttempts: 2}\n")))
	})
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := eventPlane(t, s, repo, EventConfig{})
	p.c.Delivery = testDelivery()

	tok := "gh" + "p_" + strings.Repeat("Zx9Qw2", 6)
	a, b, c := submitJob(t, p, "hooked"), submitJob(t, p, "hooked"), submitJob(t, p, "broken")
	hostile := "\x1b[31m<!channel> @alice see <https://evil.example|this>\x1b[0m \x1b]0;pwned\x07token " + tok + "\n"
	long := strings.Repeat("line of output\n", 40)
	for _, id := range []string{a.ID, b.ID} {
		if _, err := s.inner.AppendEvents(ctx, id, []store.NewEvent{
			outEvent(controlapi.KindStdout, "one\n"), outEvent(controlapi.KindStdout, "two\n"), outEvent(controlapi.KindStderr, "not wanted\n"), outEvent(controlapi.KindStdout, "three\n"),
			outEvent(controlapi.KindStdout, hostile),
			{Kind: controlapi.KindStatus, Data: json.RawMessage(`{"progress": 10}`)}, {Kind: controlapi.KindStatus, Data: json.RawMessage(`{"progress": 20}`)},
			{Kind: controlapi.KindStatus, Data: json.RawMessage(`{"progress": 30}`)},
			{Kind: controlapi.KindProduct, Data: json.RawMessage(`{"destination": "down", "url": "https://attacker.example/", "text": "hi"}`)},
			outEvent(controlapi.KindStdout, long),
		}); err != nil {
			t.Fatal(err)
		}
		finishJob(t, s, id, "done "+tok+"\n")
	}
	if _, err := s.inner.AppendEvents(ctx, c.ID, []store.NewEvent{outEvent(controlapi.KindStdout, "broken one\n")}); err != nil {
		t.Fatal(err)
	}
	finishJob(t, s, c.ID, "")

	// Before any receipt: the result is not published, whatever the state.
	if j, err := p.Get(ctx, "", a.ID); err != nil || j.ResultPublished != nil || j.Delivery == nil || j.Delivery.Acceptance != "result succeeded, notification pending" {
		t.Fatalf("before delivery: %+v, %v", j.Delivery, err)
	}

	go runDelivery(ctx, p.c, p.st)
	waitFor(t, "job a's and b's results published and c's notification failed", 30*time.Second, func() bool {
		ja, _ := p.Get(ctx, "", a.ID)
		jb, _ := p.Get(ctx, "", b.ID)
		jc, _ := p.Get(ctx, "", c.ID)
		return ja.ResultPublished != nil && jb.ResultPublished != nil && jc.Delivery != nil && jc.Delivery.Acceptance == controlapi.AcceptFailed
	})
	effects, order, dups := chat.snapshot()
	// seq 1 is the queued state, 2..11 the events above, then the state and result
	wantSeqs := []int64{2, 3, 5, 6, 9, 10, 11, 13} // stdout (not stderr), status 30 only (10, 20 collapsed), product, result
	for _, j := range []*controlapi.Job{a, b} {
		if !slices.Equal(order[j.ID], wantSeqs) {
			t.Errorf("job %s acted on %v, want %v once each in order", j.ID, order[j.ID], wantSeqs)
		}
	}
	if dups < 3 {
		t.Errorf("%d duplicate arrivals deduplicated; the timeout and the drops make at least 3", dups)
	}
	m := effects[deliver.Key(a.ID, 6, "chat")]
	if strings.ContainsAny(m.Text, "\x1b\x07") || strings.Contains(m.Text, tok) || strings.Contains(m.Text, "<!channel>") ||
		!strings.Contains(m.Text, "&lt;!channel&gt; @\u200balice see &lt;https://evil.example|this&gt;") || !strings.Contains(m.Text, "[REDACTED github-token]") ||
		len(m.Redacted) != 1 || m.Audit.Job != a.ID || m.Audit.Seq != 6 {
		t.Errorf("hostile output delivered as %+v", m)
	}
	if r := effects[deliver.Key(a.ID, 13, "chat")]; r.Result == nil || r.Result.State != controlapi.Succeeded || strings.Contains(r.Text, tok) {
		t.Errorf("result message %+v", r)
	}
	if pm := effects[deliver.Key(a.ID, 10, "chat")]; pm.Destination != "chat" || !strings.Contains(pm.Text, "attacker.example") {
		t.Errorf("product message %+v", pm)
	}
	if _, ok := effects[deliver.Key(c.ID, 2, "chat")]; !ok {
		t.Error("the down destination held back the other destination of its tenant")
	}
	lm := effects[deliver.Key(a.ID, 11, "chat")]
	if lm.Truncated == nil || lm.Truncated.DroppedLines != 35 || lm.Truncated.Artifact != "/v1/jobs/"+a.ID+"/artifacts/event-11.txt" {
		t.Fatalf("long output: %+v", lm.Truncated)
	}
	if art, err := s.inner.Artifact(ctx, "hooked", a.ID, "event-11.txt"); err != nil || string(art) != long {
		t.Errorf("artifact: %d bytes, %v", len(art), err)
	}
	if _, err := s.inner.Artifact(ctx, "broken", a.ID, "event-11.txt"); err == nil {
		t.Error("another tenant read the artifact")
	}
	// receipts: stored with the destination's id and the attempts
	ja, _ := p.Get(ctx, "", a.ID)
	d := ja.Delivery.Destinations[0]
	if ja.Delivery.Acceptance != controlapi.AcceptPublished || d.Delivered != len(wantSeqs) || d.Collapsed != 2 || d.Result == nil ||
		d.Result.RemoteID != "r-"+deliver.Key(a.ID, 13, "chat") || d.Result.Key != deliver.Key(a.ID, 13, "chat") {
		t.Errorf("job a's delivery: %+v, result %+v", ja.Delivery, d.Result)
	}
	// 4 arrivals; Go's transport may replay the dropped one itself within
	// an attempt (it carries an Idempotency-Key): 3 or 4 attempts
	if rc, _ := s.inner.Receipt(ctx, a.ID, "chat", 6); rc == nil || rc.Attempts < 3 || rc.Attempts > 4 || rc.Outcome != controlapi.ReceiptDelivered {
		t.Errorf("receipt of seq 6: %+v", rc)
	}
	jc, _ := p.Get(ctx, "", c.ID)
	for _, d := range jc.Delivery.Destinations {
		if d.Name == "down" && (d.Failed != 2 || d.Result == nil || d.Result.Attempts != 2 || !strings.Contains(d.Result.Detail, "500")) {
			t.Errorf("down: %+v, result %+v", d, d.Result)
		}
	}
	// the job's trace shows its artifacts' deliveries, each destination's
	spans := func(id string) map[string]string {
		j, err := p.Get(ctx, "", id)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, sp := range p.Trace(ctx, j).Spans {
			if sp.Name == "event delivery" && sp.Attributes["kind"] == "result" {
				out[sp.Attributes["destination"]] = sp.Attributes["outcome"]
			}
		}
		return out
	}
	if got := spans(a.ID); got["chat"] != "delivered" {
		t.Errorf("job a's result delivery spans: %v", got)
	}
	if got := spans(c.ID); got["down"] != "failed" {
		t.Errorf("job c's result delivery spans: %v", got)
	}
	// the results and products delivered are exported artifacts
	rec := httptest.NewRecorder()
	p.c.Metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !regexp.MustCompile(`(?m)^slipway_artifact_export_bytes_total\{pool="agents"\} [1-9][0-9]*$`).MatchString(rec.Body.String()) {
		t.Errorf("no artifact_export_bytes for the delivered results:\n%s", rec.Body.String())
	}
	// every consumer acknowledged all of its jobs' streams
	for _, dest := range []string{"delivery:hooked/chat", "delivery:broken/chat", "delivery:broken/down"} {
		tenant := strings.TrimPrefix(strings.Split(dest, "/")[0], "delivery:")
		if left, err := s.inner.PendingJobsOf(ctx, dest, tenant, 10); err != nil || len(left) != 0 {
			t.Errorf("%s: still pending %v, %v", dest, left, err)
		}
	}
}

// TestDestinationKindsMatchEvents: tenancy's list of kinds a destination
// may select is the event set.
func TestDestinationKindsMatchEvents(t *testing.T) {
	var ours []string
	for _, k := range controlapi.EventKinds() {
		ours = append(ours, string(k))
	}
	slices.Sort(ours)
	theirs := slices.Sorted(slices.Values(tenancy.EventKinds))
	if !slices.Equal(ours, theirs) {
		t.Errorf("tenancy.EventKinds %v, events %s %v", theirs, controlapi.EventsVersion, ours)
	}
}
