package runs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// Concurrent Creates share transactions, and each still gets its own
// outcome: the winner of a duplicate run id is stored, the loser gets
// ErrExists, an invalid manifest ErrInvalid, and the others are stored.
func TestConcurrentCreatesCommitTogether(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	const n = 64
	errs := make([]error, n)
	ids := make([]string, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		ids[i] = fmt.Sprintf("r-%02d", i)
		if i%8 == 1 {
			ids[i] = ids[i-1] // a duplicate of its neighbour
		}
		m := &runmanifest.Manifest{RunID: ids[i], WorkspaceTemplateID: "tpl"}
		if i == n-1 {
			m.Status = "done" // invalid
		}
		wg.Go(func() { <-start; errs[i] = s.Create(ctx, m) })
	}
	close(start)
	wg.Wait()
	stored := 0
	for i := range n {
		switch {
		case i == n-1:
			if !errors.Is(errs[i], ErrInvalid) {
				t.Errorf("invalid manifest: %v, want ErrInvalid", errs[i])
			}
		case i%8 == 1:
			if (errs[i] == nil) == (errs[i-1] == nil) || !errors.Is(errors.Join(errs[i], errs[i-1]), ErrExists) {
				t.Errorf("duplicates %s: %v, %v; want one nil and one ErrExists", ids[i], errs[i-1], errs[i])
			}
		case i%8 == 0:
		default:
			if errs[i] != nil {
				t.Errorf("create %s: %v", ids[i], errs[i])
			}
		}
		if errs[i] == nil {
			stored++
			if _, err := s.Get(ctx, ids[i]); err != nil {
				t.Errorf("%s: Create returned nil but %v", ids[i], err)
			}
		}
	}
	if got, _ := s.Query(ctx, runmanifest.Query{Template: "tpl"}); len(got) != stored || stored != n-1-n/8 {
		t.Errorf("%d runs stored, %d Creates returned nil, want %d", len(got), stored, n-1-n/8)
	}
	commits := s.createCommits.Load()
	t.Logf("%d Creates in %d transactions", n-1, commits)
	if commits >= n-1 {
		t.Errorf("%d concurrent Creates took %d transactions: no group commit", n-1, commits)
	}
}
