package kubefleet

import (
	"context"
	"errors"
	"fmt"

	"github.com/slipway-dev/slipway/pkg/cluster/kubeapply"
	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
)

// RenderApplier is the Applier for clusters without Argo CD: it renders
// the pool at the head of the config repository's branch (verified as its
// options say) and applies it with server-side apply, pruning what the
// previous apply left (package kubeapply).
type RenderApplier struct {
	repo         *gitops.Repo
	branch, pool string
	apply        *kubeapply.Applier
	opts         []render.Option
}

var _ Applier = (*RenderApplier)(nil)

// NewRenderApplier renders pool from repo's branch (default main) with
// opts and applies it with a. The repository must be the applier's own
// (a gitops.Repo is for one goroutine at a time; the rollout driver has
// its own).
func NewRenderApplier(repo *gitops.Repo, branch, pool string, a *kubeapply.Applier, opts ...render.Option) (*RenderApplier, error) {
	if repo == nil || a == nil || pool == "" {
		return nil, errors.New("kubefleet: a render applier needs a repository, a pool and a kubeapply.Applier")
	}
	if branch == "" {
		branch = "main"
	}
	return &RenderApplier{repo: repo, branch: branch, pool: pool, apply: a, opts: opts}, nil
}

// Sync renders the branch head and applies it; it returns the revision
// applied.
func (a *RenderApplier) Sync(ctx context.Context) (string, error) {
	tree, rev, err := a.repo.Snapshot(ctx, a.branch)
	if err != nil {
		return "", err
	}
	res, err := render.Pool(ctx, tree, a.pool, rev, a.opts...)
	if err != nil {
		return "", fmt.Errorf("kubefleet: render pool %s at %s: %w", a.pool, short(rev), err)
	}
	if _, err := a.apply.Apply(ctx, res); err != nil {
		return "", err
	}
	return rev, nil
}
