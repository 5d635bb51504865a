package store

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/slipway-dev/slipway/testharness/pgtest"
)

// TestOpenPostgresConcurrently: replicas of the control plane that start
// at once on a new database create its schema once, and each opens it.
// Before the migration took the advisory lock, two of them raced on the
// catalog ("duplicate key value violates unique constraint
// pg_type_typname_nsp_index") and one's start failed.
func TestOpenPostgresConcurrently(t *testing.T) {
	for round := range 3 {
		dsn := pgtest.New(t)
		errs := make([]error, 6)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				s, err := OpenPostgres(context.Background(), dsn)
				if err == nil {
					err = s.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}
