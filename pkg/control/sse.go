package control

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
	"github.com/slipway-dev/slipway/pkg/control/internal/stream"
)

// sseBatch bounds the events read and written at a time (each at most
// EventConfig.ChunkBytes of data): what one connection holds in memory.
const sseBatch = 64

// sseKeepalive is how often an idle stream sends a comment.
const sseKeepalive = 15 * time.Second

// ssePoll re-reads an idle stream even without a wake-up.
const ssePoll = 2 * time.Second

// events serves GET /v1/jobs/{id}/events as Server-Sent Events: each
// event with id: its sequence, from after Last-Event-ID (or ?after=N, 0
// by default), live afterwards, ending after the result event with an
// "end" event (or, with ?follow=false, when the retained events are sent). Output events lost
// to retention are announced by an "error" event without an id. A client
// that does not read within EventConfig.SlowClient is dropped; it resumes
// with Last-Event-ID.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after, follow, err := resumePoint(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if _, err := s.p.st.Get(r.Context(), tenantOf(r), id); err != nil { // visible to the caller: the record alone
		s.writeFailure(w, r, err)
		return
	}
	st := s.p.st
	cfg := s.p.c.Events
	// Subscribe before the first read: an append between them still wakes us.
	wake, unsubscribe := st.Subscribe(id)
	defer unsubscribe()
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var buf bytes.Buffer
	var scratch []byte
	send := func() error {
		if err := rc.SetWriteDeadline(time.Now().Add(cfg.SlowClient)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		_, err := w.Write(buf.Bytes())
		buf.Reset()
		if err == nil {
			err = rc.Flush()
		}
		return err
	}
	fmt.Fprintf(&buf, "retry: %d\n\n", cfg.Retry.Milliseconds())
	if send() != nil {
		return
	}
	ctx := r.Context()
	reported := after
	poll := time.NewTicker(ssePoll)
	defer poll.Stop()
	idle := time.NewTimer(sseKeepalive)
	defer idle.Stop()
	// wait waits for an append (or the poll), keeping the connection
	// alive; false: the client is gone.
	wait := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-wake:
		case <-poll.C:
		case <-idle.C:
			buf.WriteString(": keepalive\n\n")
			if send() != nil {
				return false
			}
			idle.Reset(sseKeepalive)
		}
		return true
	}
	for {
		// Events this process committed next after the client's are sent
		// from the stream's tail without a read of the store; the rest
		// (and the head: trimmed, ended) are read.
		if evs := st.FromTail(id, after, sseBatch); len(evs) > 0 {
			for _, e := range evs {
				scratch = stream.AppendEventJSON(scratch[:0], e)
				stream.WriteSSEEvent(&buf, e.Seq, e.Kind, scratch)
				after = e.Seq
			}
			if send() != nil {
				return
			}
			idle.Reset(sseKeepalive)
			// Following, a tail read to its end waits for the next append;
			// after the result event the head is read, which says the end.
			if follow && len(evs) < sseBatch && evs[len(evs)-1].Kind != controlapi.KindResult && !wait() {
				return
			}
			continue
		}
		h, evs, err := st.ReadEvents(ctx, id, after, sseBatch)
		if err != nil {
			return // the client resumes where it was
		}
		if h.TrimmedThrough > reported && h.TrimmedThrough > after { // not what the tail sent already
			stream.WriteSSE(&buf, "", "error", store.MustJSON(store.TrimmedError(id, after, h.TrimmedThrough)))
			reported = h.TrimmedThrough
		}
		for _, e := range evs {
			scratch = stream.AppendEventJSON(scratch[:0], e)
			stream.WriteSSEEvent(&buf, e.Seq, e.Kind, scratch)
			after = e.Seq
		}
		if buf.Len() > 0 {
			if send() != nil {
				return // slow or gone: dropped
			}
			idle.Reset(sseKeepalive)
		}
		if h.Ended && after >= h.Last {
			// says a client that resumed at the end that there is no more
			buf.WriteString("event: end\ndata: {\"last\":" + strconv.FormatInt(h.Last, 10) + "}\n\n")
			_ = send()
			return
		}
		if len(evs) == sseBatch {
			continue
		}
		if !follow && after >= h.Last {
			return
		}
		if !wait() {
			return
		}
	}
}

// resumePoint reads where a stream resumes: the Last-Event-ID header (a
// reconnecting client's) before ?after=.
func resumePoint(r *http.Request) (int64, bool, error) {
	follow := true
	var after int64
	for k, v := range r.URL.Query() {
		switch k {
		case "after":
			n, err := strconv.ParseInt(v[0], 10, 64)
			if err != nil || n < 0 {
				return 0, false, fmt.Errorf("after %q: want a sequence number (0 or more)", v[0])
			}
			after = n
		case "follow":
			b, err := strconv.ParseBool(v[0])
			if err != nil {
				return 0, false, fmt.Errorf("follow %q: want true or false", v[0])
			}
			follow = b
		default:
			return 0, false, fmt.Errorf("unknown query parameter %q (want after, follow)", k)
		}
	}
	if l := r.Header.Get("Last-Event-ID"); l != "" {
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil || n < 0 {
			return 0, false, fmt.Errorf("Last-Event-ID %q: want a sequence number", l)
		}
		after = n
	}
	return after, follow, nil
}
