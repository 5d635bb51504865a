package runtime

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"
)

// lineLog writes whole lines to a writer, one at a time, each with its
// time (UTC, RFC 3339 with milliseconds) and level; the zero value (and one
// on a nil writer) discards them.
type lineLog struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time // time.Now when nil
}

// Levels of a log line.
const (
	levelInfo  = "INFO"
	levelError = "ERROR"
)

func (l *lineLog) printf(format string, args ...any) { l.logf(levelError, format, args...) }

func (l *lineLog) logf(level, format string, args ...any) {
	if l == nil || l.w == nil {
		return
	}
	now := time.Now
	if l.now != nil {
		now = l.now
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%s %-5s "+format+"\n", append([]any{now().UTC().Format("2006-01-02T15:04:05.000Z07:00"), level}, args...)...)
}

// Backoff of a repeated failure's log lines: the first is written at once,
// the next after firstRepeat, each later one after twice the wait before,
// at most maxRepeat apart; a failure not seen for forgetAfter is new again.
const (
	firstRepeat = time.Second
	maxRepeat   = 5 * time.Minute
	forgetAfter = 10 * time.Minute
)

// repeatLog writes a failure that repeats (a runner image that is no
// runner fails every refill, several a second) once, and then once per
// backoff with how many times it failed since, instead of once per failure.
type repeatLog struct {
	l    *lineLog
	mu   sync.Mutex
	seen map[string]*repeat // by what failed and why
}

type repeat struct {
	first, last, next time.Time
	wait              time.Duration
	since, total      int // failures not yet reported; all of them
}

// idDigits makes the ids and numbers in two messages of the same failure
// alike, so that they count as one (sandbox names, attempts, byte counts).
var idDigits = regexp.MustCompile(`[0-9a-f]{6,}|[0-9]+`)

// failure logs msg for the thing key names (a pool and generation).
func (r *repeatLog) failure(key, msg string) {
	if r == nil || r.l == nil || r.l.w == nil {
		return
	}
	now := time.Now
	if r.l.now != nil {
		now = r.l.now
	}
	t := now()
	k := key + "\x00" + idDigits.ReplaceAllString(msg, "#")
	r.mu.Lock()
	p := r.seen[k]
	if p == nil || t.Sub(p.last) > forgetAfter {
		if r.seen == nil {
			r.seen = map[string]*repeat{}
		}
		p = &repeat{first: t, wait: firstRepeat}
		r.seen[k] = p
		p.total, p.last, p.next = 1, t, t.Add(p.wait)
		r.mu.Unlock()
		r.l.logf(levelError, "%s", msg)
		return
	}
	p.since++
	p.total++
	p.last = t
	if t.Before(p.next) {
		r.mu.Unlock()
		return
	}
	since, total, first := p.since, p.total, p.first
	p.since = 0
	p.wait = min(2*p.wait, maxRepeat)
	p.next = t.Add(p.wait)
	wait := p.wait
	r.mu.Unlock()
	r.l.logf(levelError, "%s (failed %d more times since the last report, %d since %s; the next report in %s unless it stops)",
		msg, since, total, first.UTC().Format(time.RFC3339), wait)
}

// ok says key works again: its repeated failures are forgotten, with one
// line when some were not reported.
func (r *repeatLog) ok(key, what string) {
	if r == nil || r.l == nil {
		return
	}
	r.mu.Lock()
	total := 0
	for k, p := range r.seen {
		if strings.HasPrefix(k, key+"\x00") {
			total += p.total
			delete(r.seen, k)
		}
	}
	r.mu.Unlock()
	if total > 1 {
		r.l.logf(levelInfo, "%s succeeded again after %d failures", what, total)
	}
}

// WarmOption configures NewWarm.
type WarmOption func(*Warm)

// WithWarmLog sends a line per failed sandbox create (refill or cold
// start) to w, with its time and level, the pool, generation, owner and the
// reason. A failure that repeats is written once, then once per backoff (1 s
// doubling to 5 min) with how many times it failed since; a create that
// works again says after how many failures. nil keeps the default, none.
func WithWarmLog(w io.Writer) WarmOption {
	return func(wm *Warm) { wm.log = &repeatLog{l: &lineLog{w: w, now: func() time.Time { return wm.now() }}} }
}

// SyncerOption configures NewSyncer.
type SyncerOption func(*Syncer)

// WithSyncLog sends one line per failed sync of the config repository to
// w, with the reason and the revision still served (whose age makes claims
// stale), and one when a sync succeeds again; nil keeps the default, none.
func WithSyncLog(w io.Writer) SyncerOption {
	return func(s *Syncer) { s.log = &lineLog{w: w} }
}
