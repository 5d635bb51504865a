package runtime

import (
	"context"
	"testing"
	"time"
)

// A cold start waits while a claim that may take a warm member has not
// returned, and goes as soon as it has: the order is what is tested, not
// a duration (coldYield is an hour here).
func TestColdStartsYieldToWarmGrants(t *testing.T) {
	w := NewWarm(nil, nil)
	w.coldYield = time.Hour
	first, second := w.beginGrant(), w.beginGrant()

	yielded := make(chan struct{})
	go func() { w.yieldToHits(context.Background()); close(yielded) }()

	first()
	first() // repeat-safe: the second grant still counts
	select {
	case <-yielded:
		t.Fatal("the cold start went while a warm grant was under way")
	case <-time.After(50 * time.Millisecond):
	}
	second()
	select {
	case <-yielded:
	case <-time.After(time.Minute):
		t.Fatal("the cold start still waits after the warm grants returned")
	}

	// With none under way, a cold start goes at once, unless a warm
	// member was taken within hitQuiet.
	start := make(chan struct{})
	go func() { w.yieldToHits(context.Background()); close(start) }()
	select {
	case <-start:
	case <-time.After(time.Minute):
		t.Fatal("a cold start waits with no warm grant under way")
	}

	// A canceled claim stops yielding.
	w.beginGrant()
	ctx, cancel := context.WithCancel(context.Background())
	canceled := make(chan struct{})
	go func() { w.yieldToHits(ctx); close(canceled) }()
	cancel()
	select {
	case <-canceled:
	case <-time.After(time.Minute):
		t.Fatal("a canceled cold start still yields")
	}
}
