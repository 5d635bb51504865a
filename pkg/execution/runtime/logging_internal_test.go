package runtime

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRepeatedFailureLoggedOnce: the case, a runner image that is no
// runner failing every refill, 24 times in 9 s: one line at once, then one
// per backoff (after 1 s, 2 s more, 4 s more) with the count since, each
// with its time and level; a create that works again says after how many.
func TestRepeatedFailureLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	now := t0
	r := &repeatLog{l: &lineLog{w: &buf, now: func() time.Time { return now }}}
	for i := range 24 {
		now = t0.Add(time.Duration(i) * 375 * time.Millisecond) // 24 in 9 s
		r.failure("agents g-1", fmt.Sprintf("sandbox create failed: pool agents, generation g-1, for warm: sandbox sb-%06x: sandbox: runner identity mismatch: the runner says it is 1a2b3c4d, the spec wants 5e6f7a8b", i))
	}
	r.failure("other g-2", "sandbox create failed: pool other, generation g-2, for warm: no space left")
	r.ok("agents g-1", "sandbox create: pool agents, generation g-1")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`^2026-12-06T09:00:00\.000Z ERROR sandbox create failed: pool agents, generation g-1, for warm: sandbox sb-000000: .*runner identity mismatch.*5e6f7a8b$`,
		`^2026-12-06T09:00:01\.125Z ERROR sandbox create failed: .* \(failed 3 more times since the last report, 4 since 2026-12-06T09:00:00Z; the next report in 2s unless it stops\)$`,
		`^2026-12-06T09:00:03\.375Z ERROR .* \(failed 6 more times since the last report, 10 since 2026-12-06T09:00:00Z; the next report in 4s unless it stops\)$`,
		`^2026-12-06T09:00:07\.500Z ERROR .* \(failed 11 more times since the last report, 21 since 2026-12-06T09:00:00Z; the next report in 8s unless it stops\)$`,
		`^2026-12-06T09:00:08\.625Z ERROR sandbox create failed: pool other, generation g-2, for warm: no space left$`,
		`^2026-12-06T09:00:08\.625Z INFO  sandbox create: pool agents, generation g-1 succeeded again after 24 failures$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(lines[i]) {
			t.Errorf("line %d:\n%s\nwant %s", i+1, lines[i], w)
		}
	}
	// After it worked, the same failure is new again: written at once.
	buf.Reset()
	r.failure("agents g-1", "sandbox create failed: pool agents, generation g-1, for warm: again")
	if !strings.Contains(buf.String(), "ERROR sandbox create failed: pool agents, generation g-1, for warm: again\n") {
		t.Errorf("after ok: %q", buf.String())
	}
}
