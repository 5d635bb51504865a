package console

import (
	"context"
	"errors"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
)

// errNoRepo is what a page that reads the config repository says when the
// console was started without one.
var errNoRepo = errors.New("no config repository is configured (--config-repo)")

// readRepo runs fn with the config repository, one request at a time. A
// gitops.Repo and the Trees it returns are for one goroutine at a time
// (its object store is not safe for concurrent use: each read fetches the
// branch head into it), and the console's page handlers run concurrently.
// The lock is held only while fn reads the repository, never while a page
// waits on a runtime or the control plane; a request whose context ends
// while it waits for the lock gives up.
//
// Opening a Repo per request instead would fetch the branch's whole
// history (rollout history reads old commits) on every page load; one
// shared store fetches only what is new since the last read.
func (s *Server) readRepo(ctx context.Context, fn func(repo *gitops.Repo) error) error {
	if s.repo == nil {
		return errNoRepo
	}
	select {
	case s.repoLock <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.repoLock }()
	return fn(s.repo)
}

// readTree runs fn on a snapshot of the branch's head and its commit id,
// under readRepo's lock: fn must read all it needs from the tree before it
// returns, and keep nothing of it.
func (s *Server) readTree(ctx context.Context, fn func(tr *gitops.Tree, rev string) error) error {
	return s.readRepo(ctx, func(repo *gitops.Repo) error {
		tr, rev, err := repo.Snapshot(ctx, s.branch)
		if err != nil {
			return err
		}
		return fn(tr, rev)
	})
}
