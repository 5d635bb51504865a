package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
)

// eventPlane is a plane on s with the events configured as ec (admitting,
// not dispatching).
func eventPlane(t *testing.T, s *Store, repo *gitops.Repo, ec EventConfig) *Plane {
	t.Helper()
	p, err := New(context.Background(), Config{Store: s, Config: NewRepoConfig(repo, "main", time.Millisecond),
		Runtimes: map[string][]Runtime{"agents": nil}, MaxActive: 8, QueueBound: 50, noDispatch: true, manualAdmission: true, Events: ec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	return p
}

func submitJob(t *testing.T, p *Plane, tenant string) *controlapi.Job {
	t.Helper()
	j, _, err := p.Submit(context.Background(), tenant, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true")})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func outEvent(kind controlapi.EventKind, text string) store.NewEvent {
	return store.NewEvent{Kind: kind, Data: store.MustJSON(controlapi.OutputData{Text: text})}
}

func allEvents(t *testing.T, s *Store, id string) (controlapi.StreamHead, []controlapi.Event) {
	t.Helper()
	h, evs, err := s.Events(context.Background(), "", id, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	return h, evs
}

// TestEventSequencesConcurrent: appends from many goroutines get every
// sequence once, with no gap, each writer's events in its order.
func TestEventSequencesConcurrent(t *testing.T) {
	repo := configRepo(t)
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		p := eventPlane(t, s, repo, EventConfig{})
		j := submitJob(t, p, "globex")
		const writers, appends = 8, 40
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range appends {
					evs := []store.NewEvent{outEvent(controlapi.KindStdout, fmt.Sprintf("%d:%d:a", w, i))}
					if i%3 == 0 {
						evs = append(evs, outEvent(controlapi.KindStderr, fmt.Sprintf("%d:%d:b", w, i)))
					}
					if _, err := s.inner.AppendEvents(ctx, j.ID, evs); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		h, evs := allEvents(t, s, j.ID)
		want := 1 + writers*appends + writers*((appends+2)/3)
		if int(h.Last) != want || len(evs) != want {
			t.Fatalf("head %+v, %d events; want %d", h, len(evs), want)
		}
		seen := map[string]bool{}
		lastOf := map[int]string{}
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				t.Fatalf("event %d has sequence %d: a gap or a repeat", i, e.Seq)
			}
			if e.Kind == controlapi.KindState {
				continue
			}
			var d controlapi.OutputData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			if seen[d.Text] {
				t.Fatalf("%s twice", d.Text)
			}
			seen[d.Text] = true
			var w, n int
			var part string
			fmt.Sscanf(d.Text, "%d:%d:%s", &w, &n, &part)
			key := fmt.Sprintf("%04d:%s", n, part)
			if prev, ok := lastOf[w]; ok && prev >= key {
				t.Fatalf("writer %d: %s after %s", w, key, prev)
			}
			lastOf[w] = key
		}
	})
}

// TestEventsOfTransitions: every transition appends its state event in its
// transaction; the terminal one appends the result last; the stream then
// refuses appends; kinds outside v1 are refused.
func TestEventsOfTransitions(t *testing.T) {
	repo := configRepo(t)
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		p := eventPlane(t, s, repo, EventConfig{})
		j := submitJob(t, p, "globex")
		for _, bad := range []store.NewEvent{
			{Kind: "stdin", Data: json.RawMessage(`{}`)},
			{Kind: controlapi.KindStatus, Data: json.RawMessage(`[1]`)},
			{Kind: controlapi.KindStatus, Data: json.RawMessage(`null`)},
			{Kind: controlapi.KindResult, Data: json.RawMessage(`{}`)},
			{Kind: controlapi.KindState, Data: json.RawMessage(`{}`)},
		} {
			if _, err := s.inner.AppendEvents(ctx, j.ID, []store.NewEvent{bad}); !errors.Is(err, ErrEventKind) {
				t.Errorf("append %s %s: %v, want ErrEventKind", bad.Kind, bad.Data, err)
			}
		}
		if _, err := s.inner.AppendEvents(ctx, j.ID, []store.NewEvent{outEvent(controlapi.KindStdout, "hello\n"), {Kind: controlapi.KindToolCall, Data: json.RawMessage(`{"tool":"grep"}`)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Cancel(ctx, "globex", j.ID); err != nil {
			t.Fatal(err)
		}
		h, evs := allEvents(t, s, j.ID)
		kinds := ""
		for _, e := range evs {
			kinds += string(e.Kind) + " "
		}
		if kinds != "state stdout tool_call state result " || !h.Ended || h.Last != 5 {
			t.Fatalf("events %q, head %+v", kinds, h)
		}
		var r controlapi.ResultData
		if err := json.Unmarshal(evs[4].Data, &r); err != nil || r.State != controlapi.Canceled || r.Reason != "canceled" {
			t.Fatalf("result %s: %v", evs[4].Data, err)
		}
		var st controlapi.StateData
		_ = json.Unmarshal(evs[3].Data, &st)
		if st.State != controlapi.Canceled {
			t.Fatalf("last state event %s", evs[3].Data)
		}
		got, _ := s.inner.Get(ctx, "", j.ID)
		if len(got.Story) != 2 || got.Story[1].State != controlapi.Canceled {
			t.Fatalf("story %+v", got.Story)
		}
		if _, err := s.inner.AppendEvents(ctx, j.ID, []store.NewEvent{outEvent(controlapi.KindStdout, "late")}); !errors.Is(err, ErrStreamEnded) {
			t.Fatalf("append after the result: %v", err)
		}
		if _, _, err := s.Events(ctx, "acme", j.ID, 0, 10); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another tenant's events: %v", err)
		}
	})
}

// TestEventRetention: size retention trims the oldest output events only
// and records how far; time retention likewise; state and result events
// stay.
func TestEventRetention(t *testing.T) {
	repo := configRepo(t)
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		p := eventPlane(t, s, repo, EventConfig{MaxBytesPerJob: 1000, MaxAge: time.Hour})
		j := submitJob(t, p, "globex")
		for i := range 30 {
			if _, err := s.inner.AppendEvents(ctx, j.ID, []store.NewEvent{outEvent(controlapi.KindStdout, fmt.Sprintf("%02d %080d\n", i, 0))}); err != nil {
				t.Fatal(err)
			}
		}
		h, evs := allEvents(t, s, j.ID)
		size := 0
		for _, e := range evs[1:] {
			size += len(e.Data)
		}
		if h.Last != 31 || h.TrimmedThrough < 2 || size > 1000 || evs[0].Kind != controlapi.KindState || evs[1].Seq != h.TrimmedThrough+1 {
			t.Fatalf("after size retention: head %+v, %d events, %d bytes, first %d %s", h, len(evs), size, evs[0].Seq, evs[0].Kind)
		}
		// time retention: everything older than an hour from a day ahead
		if n, err := s.inner.TrimEvents(ctx, time.Now().Add(24*time.Hour), 100); err != nil || n != 1 {
			t.Fatalf("TrimEvents = %d, %v", n, err)
		}
		if _, err := p.Cancel(ctx, "globex", j.ID); err != nil {
			t.Fatal(err)
		}
		h, evs = allEvents(t, s, j.ID)
		if h.TrimmedThrough != 31 || len(evs) != 3 || evs[0].Seq != 1 || evs[1].Kind != controlapi.KindState || evs[2].Kind != controlapi.KindResult {
			t.Fatalf("after time retention: head %+v, events %+v", h, evs)
		}
		// the result is never trimmed
		if n, err := s.inner.TrimEvents(ctx, time.Now().Add(48*time.Hour), 100); err != nil || n != 0 {
			t.Fatalf("TrimEvents of a trimmed job = %d, %v", n, err)
		}
	})
}

// TestConsumerAckRedelivery: a consumer gets events at least once: what
// its dead owner did not acknowledge is delivered again to the next owner;
// the dead owner can no longer acknowledge.
func TestConsumerAckRedelivery(t *testing.T) {
	repo := configRepo(t)
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		p := eventPlane(t, s, repo, EventConfig{})
		j := submitJob(t, p, "globex")
		for i := range 5 {
			if _, err := s.inner.AppendEvents(ctx, j.ID, []store.NewEvent{outEvent(controlapi.KindStdout, fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
		d, err := s.inner.Consume(ctx, "webhook", "worker-a", j.ID, 200*time.Millisecond, 4)
		if err != nil || len(d.Events) != 4 || d.Events[0].Seq != 1 || d.Redelivered != 0 {
			t.Fatalf("first delivery %+v, %v", d, err)
		}
		if err := s.inner.Ack(ctx, "webhook", "worker-a", j.ID, 2); err != nil {
			t.Fatal(err)
		}
		if _, err := s.inner.Consume(ctx, "webhook", "worker-b", j.ID, time.Minute, 10); !errors.Is(err, ErrConflict) {
			t.Fatalf("second owner while the lease holds: %v", err)
		}
		if pj, err := s.inner.PendingJobs(ctx, "webhook", 10); err != nil || len(pj) != 1 || pj[0] != j.ID {
			t.Fatalf("PendingJobs = %v, %v", pj, err)
		}
		time.Sleep(300 * time.Millisecond) // worker-a dies: its lease runs out
		d, err = s.inner.Consume(ctx, "webhook", "worker-b", j.ID, time.Minute, 10)
		if err != nil || len(d.Events) != 4 || d.Events[0].Seq != 3 || d.Acked != 2 || d.Redelivered != 2 {
			t.Fatalf("delivery to the next owner %+v, %v", d, err)
		}
		if err := s.inner.Ack(ctx, "webhook", "worker-a", j.ID, 6); !errors.Is(err, ErrConflict) {
			t.Fatalf("the dead owner's ack: %v", err)
		}
		if err := s.inner.Ack(ctx, "webhook", "worker-b", j.ID, 99); !errors.Is(err, ErrBadRequest) {
			t.Fatalf("ack beyond the stream: %v", err)
		}
		if err := s.inner.Ack(ctx, "webhook", "worker-b", j.ID, 6); err != nil {
			t.Fatal(err)
		}
		if err := s.inner.Ack(ctx, "webhook", "worker-b", j.ID, 4); err != nil { // never backwards
			t.Fatal(err)
		}
		if pj, _ := s.inner.PendingJobs(ctx, "webhook", 10); len(pj) != 0 {
			t.Fatalf("PendingJobs after the ack = %v", pj)
		}
		if _, err := p.Cancel(ctx, "globex", j.ID); err != nil {
			t.Fatal(err)
		}
		d, err = s.inner.Consume(ctx, "webhook", "worker-b", j.ID, time.Minute, 10)
		if err != nil || len(d.Events) != 2 || d.Events[1].Kind != controlapi.KindResult || d.Done {
			t.Fatalf("the end %+v, %v", d, err)
		}
		_ = s.inner.Ack(ctx, "webhook", "worker-b", j.ID, d.Events[1].Seq)
		if d, err = s.inner.Consume(ctx, "webhook", "worker-b", j.ID, time.Minute, 10); err != nil || !d.Done || len(d.Events) != 0 {
			t.Fatalf("after the last ack %+v, %v", d, err)
		}
	})
}

func seqs(evs []controlapi.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
