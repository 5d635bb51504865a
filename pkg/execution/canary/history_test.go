package canary_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/canary"
)

func round(i int) *canary.Round {
	return &canary.Round{Pool: "agents", Started: time.Unix(int64(1000+i), 0).UTC(), Finished: time.Unix(int64(1001+i), 0).UTC(),
		Passed: true, RunID: fmt.Sprintf("r-%03d", i), Steps: []canary.StepResult{{Step: canary.StepClaim, Result: canary.Pass, Duration: time.Millisecond}}}
}

func lineCount(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// The history keeps the newest rounds up to its maximum, in order; -n
// reads the last ones; a torn last line (a writer that crashed) is left
// out by readers and cut by the next append; a line that is not a round
// is named by its number.
func TestHistoryBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "canary.jsonl")
	h, err := canary.NewHistory(path, 10)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 25 {
		if err := h.Append(round(i)); err != nil {
			t.Fatal(err)
		}
		if n := lineCount(t, path); n > 10 {
			t.Fatalf("after %d rounds the history holds %d lines, at most 10 wanted", i+1, n)
		}
	}
	rounds, bad, err := canary.ReadHistory(path, 0)
	if err != nil || len(bad) > 0 || len(rounds) != 10 || rounds[0].RunID != "r-015" || rounds[9].RunID != "r-024" {
		t.Fatalf("history: %d rounds %v %v", len(rounds), bad, err)
	}
	last, _, _ := canary.ReadHistory(path, 3)
	if len(last) != 3 || last[0].RunID != "r-022" || last[2].RunID != "r-024" {
		t.Fatalf("-n 3: %+v", last)
	}

	// A writer crashed in the middle of a line.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"pool":"agents","started":"2026-`)
	f.Close()
	if rounds, bad, err := canary.ReadHistory(path, 0); err != nil || len(bad) > 0 || len(rounds) != 10 {
		t.Fatalf("with a torn last line: %d rounds %v %v", len(rounds), bad, err)
	}
	if err := h.Append(round(25)); err != nil {
		t.Fatal(err)
	}
	rounds, bad, err = canary.ReadHistory(path, 0)
	if err != nil || len(bad) > 0 || len(rounds) != 10 || rounds[9].RunID != "r-025" || lineCount(t, path) != 10 {
		t.Fatalf("after the torn line: %d rounds %v %v", len(rounds), bad, err)
	}

	// Not a round.
	f, _ = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("not json\n")
	f.Close()
	if _, bad, err := canary.ReadHistory(path, 0); err != nil || len(bad) != 1 || bad[0].Line != 11 {
		t.Fatalf("a bad line: %v %v", bad, err)
	}
	if _, err := canary.NewHistory(path, -1); err == nil {
		t.Error("a history of -1 rounds was accepted")
	}
	if _, _, err := canary.ReadHistory(filepath.Join(t.TempDir(), "none.jsonl"), 0); err == nil || !strings.Contains(err.Error(), "none.jsonl") {
		t.Errorf("a missing history: %v", err)
	}
}

// Canaries of several pools append to one history at once: every line is
// a whole round, and the bound holds.
func TestHistoryConcurrentAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "canary.jsonl")
	var wg sync.WaitGroup
	for w := range 8 {
		h, err := canary.NewHistory(path, 50)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if err := h.Append(round(w*100 + i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	rounds, bad, err := canary.ReadHistory(path, 0)
	if err != nil || len(bad) > 0 || len(rounds) != 50 || lineCount(t, path) != 50 {
		t.Fatalf("%d rounds, bad lines %v, %v", len(rounds), bad, err)
	}
	seen := map[string]bool{}
	for _, r := range rounds {
		if seen[r.RunID] {
			t.Fatalf("round %s twice", r.RunID)
		}
		seen[r.RunID] = true
	}
}
