package kubesandbox

import (
	"context"
	"testing"
	"time"
)

// A warm member's proof waits while a claim is awaited and for proofQuiet
// after, and no longer than proofMaxDefer under claims that never pause.
func TestProofYieldsToClaims(t *testing.T) {
	b := &Backend{awaiting: map[string]int{}}
	ctx := context.Background()

	start := time.Now()
	b.yieldToClaims(ctx)
	if d := time.Since(start); d > proofPoll {
		t.Fatalf("no claim ever awaited: the proof waited %v", d)
	}

	done := b.awaiting1("sw-a")
	returned := make(chan time.Time, 1)
	go func() { b.yieldToClaims(ctx); returned <- time.Now() }()
	select {
	case <-returned:
		t.Fatal("the proof went on while claim sw-a was awaited")
	case <-time.After(4 * proofQuiet):
	}
	done()
	ended := time.Now()
	select {
	case at := <-returned:
		if w := at.Sub(ended); w < proofQuiet {
			t.Fatalf("the proof went on %v after the claim, before %v of quiet", w, proofQuiet)
		}
	case <-time.After(proofQuiet + time.Second):
		t.Fatal("the proof still waited a second after claims had been quiet for proofQuiet")
	}

	never := b.awaiting1("sw-b") // a claim that is never done
	defer never()
	start = time.Now()
	b.yieldToClaims(ctx)
	if d := time.Since(start); d < proofMaxDefer || d > proofMaxDefer+time.Second {
		t.Fatalf("under a claim that never ends the proof waited %v, want %v", d, proofMaxDefer)
	}

	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	b.yieldToClaims(cctx)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("ctx ended after 100ms, the proof waited %v", d)
	}
}
