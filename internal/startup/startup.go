package startup

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slipway-dev/slipway/internal/apierror"
)

// Part is one thing the process waits for, as GET /readyz names it.
type Part struct {
	Part   string `json:"part"`
	Reason string `json:"reason"`
}

// readiness is the JSON shape of both planes' GET /readyz answer
// (controlapi.Readiness, runtimeapi.Readiness).
type readiness struct {
	Ready   bool   `json:"ready"`
	Failing []Part `json:"failing,omitempty"`
}

// errorBody is the JSON shape both planes' error answers share (their
// ErrorBody's error, code and id fields).
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Gate is the handler of a plane that is starting: it answers the probes
// and refuses the rest until Open gives it the plane's handler.
type Gate struct {
	name string // "control plane", "runtime": who is starting
	log  *slog.Logger

	open    atomic.Pointer[http.Handler]
	mu      sync.Mutex
	waiting map[string]Part // part: why, while Wait retries it
	order   []string
	repeats apierror.Repeats
}

// NewGate is a closed Gate of the process name, logging to log.
func NewGate(name string, log *slog.Logger) *Gate {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Gate{name: name, log: log, waiting: map[string]Part{}}
}

// Open hands every later request to h.
func (g *Gate) Open(h http.Handler) { g.open.Store(&h) }

// Failing is what the gate waits for now, in the order the parts were
// first waited for.
func (g *Gate) Failing() []Part {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Part
	for _, name := range g.order {
		if p, ok := g.waiting[name]; ok {
			out = append(out, p)
		}
	}
	return out
}

func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := g.open.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	switch r.URL.Path {
	case "/healthz":
		w.WriteHeader(http.StatusOK)
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "starting"})
		return
	case "/readyz":
		failing := g.Failing()
		if len(failing) == 0 { // between two parts, or building the handler
			failing = []Part{{Part: "start", Reason: g.name + " is starting"}}
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(readiness{Failing: failing})
		return
	}
	msg := g.name + " is starting"
	if f := g.Failing(); len(f) > 0 {
		names := make([]string, len(f))
		for i, p := range f {
			names[i] = p.Part
		}
		msg += ": waiting for its " + strings.Join(names, " and ") + " (GET /readyz says why)"
	}
	w.Header().Set("Retry-After", "5")
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(errorBody{Error: msg, Code: "unavailable"})
}

// Backoff bounds Wait's pauses between tries: it starts at Min and
// doubles up to Max.
type Backoff struct{ Min, Max time.Duration }

// DefaultBackoff is half a second doubling to 15 s: a database that comes
// up is found within 15 s, one that stays down costs a try every 15 s.
var DefaultBackoff = Backoff{Min: 500 * time.Millisecond, Max: 15 * time.Second}

// Permanent marks an error no retry can fix: Wait returns it at once.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err}
}

type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

// Wait calls try until it succeeds, returns a Permanent error or ctx
// ends. While it fails, GET /readyz names part with what (e.g. "does not
// answer") and an error id; the log has one line per distinct error under
// that id, the error on one line.
func Wait[T any](ctx context.Context, g *Gate, part, what string, b Backoff, try func(ctx context.Context) (T, error)) (T, error) {
	pause := b.Min
	for {
		v, err := try(ctx)
		if err == nil {
			g.clear(part)
			return v, nil
		}
		var zero T
		if p := (*permanent)(nil); errors.As(err, &p) {
			g.clear(part)
			return zero, p.err
		}
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
		g.fail(part, what, pause, err)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return zero, ctx.Err()
		case <-t.C:
		}
		if pause *= 2; pause > b.Max {
			pause = b.Max
		}
	}
}

func (g *Gate) fail(part, what string, pause time.Duration, err error) {
	id := g.repeats.Tell(part, err, func(id string) {
		g.log.Error("not ready: "+part+" "+what+"; retrying", "part", part, "error_id", id, "err", OneLine(err))
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	if !slices.Contains(g.order, part) {
		g.order = append(g.order, part)
	}
	g.waiting[part] = Part{Part: part, Reason: part + " " + what + " (error id " + id + "; the " + g.name + "'s log has the detail)"}
}

func (g *Gate) clear(part string) {
	g.repeats.Clear(part)
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.waiting, part)
}

// OneLine is err's text on one line: a driver that lists each address it
// tried on a line of its own (pgx) makes one log line still.
func OneLine(err error) string {
	var b strings.Builder
	for line := range strings.SplitSeq(err.Error(), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if b.Len() > 0 {
			if strings.HasSuffix(b.String(), ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(line)
	}
	return b.String()
}
