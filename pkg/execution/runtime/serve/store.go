package serve

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// errSandboxExists keeps a run open in finishOrphans.
var errSandboxExists = errors.New("its sandbox still exists")

// finishOrphans finalises the open runs (granted or running) whose sandbox
// be no longer has: no claim can end them any more. Each is marked failed,
// with its resources released at released (unless it recorded that time
// already); everything else it recorded stays. A run whose sandbox still
// exists, running or dead, is left open, and so is one suspended says is
// suspended (it has no sandbox by design: a restart resumes it). It
// returns how many it finalised.
func finishOrphans(ctx context.Context, store runs.Store, be sandbox.Backend, released time.Time, keep func(runID string) bool) (int, error) {
	open, err := store.Open(ctx)
	if err != nil || len(open) == 0 {
		return 0, err
	}
	all, err := be.List(ctx, sandbox.Filter{})
	if err != nil {
		return 0, err
	}
	exists := make(map[string]bool, len(all))
	for _, s := range all {
		exists[s.ID] = true
	}
	n := 0
	var errs []error
	for _, id := range open {
		if keep(id) {
			continue
		}
		err := store.Update(ctx, id, func(m *runmanifest.Manifest) error {
			if exists[m.SandboxID] {
				return errSandboxExists
			}
			m.Status = runmanifest.StatusFailed
			if m.Lifecycle.ResourcesReleased.IsZero() {
				m.Lifecycle.ResourcesReleased = released
			}
			return nil
		})
		switch {
		case err == nil:
			n++
		case errors.Is(err, errSandboxExists), errors.Is(err, runs.ErrCompleted):
		default:
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// openRuns opens the run store c names: PostgreSQL for a DSN, else SQLite
// in the state directory.
func openRuns(ctx context.Context, c Config) (runs.Store, error) {
	switch {
	case c.DB == "":
		return runs.OpenSQLite(ctx, filepath.Join(c.State, runs.StateFile))
	case strings.HasPrefix(c.DB, "postgres://"), strings.HasPrefix(c.DB, "postgresql://"):
		return runs.OpenPostgres(ctx, c.DB)
	}
	return nil, fmt.Errorf("%w: runtime: the run store's database: want a postgres:// DSN (or none: SQLite in the state directory)", runs.ErrInvalid)
}
