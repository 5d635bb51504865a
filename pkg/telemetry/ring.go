package telemetry

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// SpanRecord is an ended span as the ring keeps it.
type SpanRecord struct {
	TraceID    string            `json:"traceId"`
	SpanID     string            `json:"spanId"`
	ParentID   string            `json:"parentId,omitempty"`
	Name       string            `json:"name"`
	Start      time.Time         `json:"start"`
	End        time.Time         `json:"end"`
	Seconds    float64           `json:"seconds"`
	Attributes map[string]string `json:"attributes,omitempty"`
	// Error is the span's error status description, when it has one.
	Error string `json:"error,omitempty"`
}

// Ring keeps the last N ended spans; it is a span processor.
type Ring struct {
	mu   sync.Mutex
	buf  []SpanRecord
	next int
	full bool
}

var _ sdktrace.SpanProcessor = (*Ring)(nil)

// NewRing keeps n spans.
func NewRing(n int) *Ring { return &Ring{buf: make([]SpanRecord, n)} }

// OnStart does nothing: the ring keeps ended spans.
func (r *Ring) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd keeps s, dropping the oldest span when full.
func (r *Ring) OnEnd(s sdktrace.ReadOnlySpan) {
	rec := SpanRecord{TraceID: s.SpanContext().TraceID().String(), SpanID: s.SpanContext().SpanID().String(), Name: s.Name(),
		Start: s.StartTime().UTC(), End: s.EndTime().UTC(), Seconds: s.EndTime().Sub(s.StartTime()).Seconds()}
	if p := s.Parent(); p.IsValid() {
		rec.ParentID = p.SpanID().String()
	}
	if as := s.Attributes(); len(as) > 0 {
		rec.Attributes = make(map[string]string, len(as))
		for _, a := range as {
			rec.Attributes[string(a.Key)] = a.Value.String()
		}
	}
	if st := s.Status(); st.Code == codes.Error {
		rec.Error = orWord(st.Description, "error")
	}
	r.mu.Lock()
	r.buf[r.next] = rec
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
	r.mu.Unlock()
}

// Shutdown does nothing.
func (r *Ring) Shutdown(context.Context) error { return nil }

// ForceFlush does nothing.
func (r *Ring) ForceFlush(context.Context) error { return nil }

// Trace returns the spans of trace id the ring still holds, by start time.
func (r *Ring) Trace(id trace.TraceID) []SpanRecord {
	want := id.String()
	r.mu.Lock()
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	var out []SpanRecord
	for _, s := range r.buf[:n] {
		if s.TraceID == want {
			out = append(out, s)
		}
	}
	r.mu.Unlock()
	slices.SortStableFunc(out, byStart)
	return out
}

// byStart orders spans by start, and a span that starts with another and
// ends after it (its parent) first.
func byStart(a, b SpanRecord) int {
	if c := a.Start.Compare(b.Start); c != 0 {
		return c
	}
	return b.End.Compare(a.End)
}

func orWord(s, w string) string {
	if s == "" {
		return w
	}
	return s
}

// WriteTree writes spans as a tree: each span's name, its duration, its
// start as an offset from the first span's, and its attributes; a span
// whose parent is not among spans is a root.
func WriteTree(w io.Writer, spans []SpanRecord) error {
	if len(spans) == 0 {
		_, err := fmt.Fprintln(w, "(no spans)")
		return err
	}
	ids := map[string]bool{}
	t0 := spans[0].Start
	for _, s := range spans {
		ids[s.SpanID] = true
		if s.Start.Before(t0) {
			t0 = s.Start
		}
	}
	kids := map[string][]SpanRecord{}
	var roots []SpanRecord
	for _, s := range spans {
		if s.ParentID == "" || !ids[s.ParentID] {
			roots = append(roots, s)
			continue
		}
		kids[s.ParentID] = append(kids[s.ParentID], s)
	}
	var b strings.Builder
	var walk func(s SpanRecord, depth int)
	walk = func(s SpanRecord, depth int) {
		name := strings.Repeat("  ", depth) + s.Name
		fmt.Fprintf(&b, "%-34s %10s  +%-9s", name, fmtDur(s.End.Sub(s.Start)), fmtDur(s.Start.Sub(t0)))
		for _, k := range slices.Sorted(maps.Keys(s.Attributes)) {
			fmt.Fprintf(&b, " %s=%s", k, s.Attributes[k])
		}
		if s.Error != "" {
			fmt.Fprintf(&b, " error=%q", s.Error)
		}
		b.WriteByte('\n')
		cs := kids[s.SpanID]
		slices.SortStableFunc(cs, byStart)
		for _, c := range cs {
			walk(c, depth+1)
		}
	}
	slices.SortStableFunc(roots, byStart)
	for _, r := range roots {
		walk(r, 0)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDur(-d)
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.3fs", d.Seconds())
}
