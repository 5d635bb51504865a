package runtime

import (
	"fmt"
	"testing"
)

// TestDenialRevisionsBounded: however many policy revisions deny egress
// over a runtime's life, policy_denial_count exports the newest
// DenialRevisions of them, with their counts.
func TestDenialRevisionsBounded(t *testing.T) {
	r := &Runtime{}
	for i := range 50 {
		r.countDenials(fmt.Sprintf("rev%02d", i), 2)
		r.countDenials(fmt.Sprintf("rev%02d", i), 1)
		r.countDenials("rev00", 0) // nothing denied: no series
	}
	got := r.PolicyDenials()
	if len(got) != DenialRevisions {
		t.Fatalf("%d revisions exported, want %d: %v", len(got), DenialRevisions, got)
	}
	for i := 50 - DenialRevisions; i < 50; i++ {
		if n := got[fmt.Sprintf("rev%02d", i)]; n != 3 {
			t.Errorf("rev%02d: %v denials, want 3", i, n)
		}
	}
}
