package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
)

// PoolSettings is a pool's pool.yaml at the head of a branch: `slipway
// pool show`.
type PoolSettings struct {
	Pool string `json:"pool"`
	// File is pool.yaml's path and Revision the commit it was read at.
	File     string `json:"file"`
	Revision string `json:"revision"`
	// Settings under the names PoolSet takes; Spec as parsed.
	Settings []pool.Setting `json:"settings"`
	Spec     pool.Spec      `json:"spec"`
	// Document is the file as stored, comments and all.
	Document string `json:"-"`
}

// ShowPool reads pool name's pool.yaml at the head of branch (default
// "main") of the config repository repoURL.
func ShowPool(ctx context.Context, repoURL, branch, name string, opts ...gitops.Option) (*PoolSettings, error) {
	if !pool.ValidName(name) {
		return nil, fmt.Errorf("release: %q is not a pool name (lower-case letters, digits, '-')", name)
	}
	if branch == "" {
		branch = "main"
	}
	repo, err := gitops.Open(ctx, repoURL, opts...)
	if err != nil {
		return nil, err
	}
	t, rev, err := repo.Snapshot(ctx, branch)
	if err != nil {
		return nil, err
	}
	b, err := readPoolFile(t, repo.URL(), name)
	if err != nil {
		return nil, err
	}
	p, err := pool.ParsePool(b, pool.PoolFile(name))
	if err != nil {
		return nil, err
	}
	return &PoolSettings{Pool: name, File: pool.PoolFile(name), Revision: rev, Settings: p.Settings(), Spec: p.Spec, Document: string(b)}, nil
}

func readPoolFile(t *gitops.Tree, repo, name string) ([]byte, error) {
	b, err := t.ReadFile(pool.PoolFile(name))
	if errors.Is(err, gitops.ErrNotExist) {
		return nil, fmt.Errorf("release: %s holds no %s (slipway config init --pool %s seeds it): %w", repo, pool.PoolFile(name), name, err)
	}
	return b, err
}

// PoolSet is one `slipway pool set`: settings of a pool's pool.yaml
// changed in one reviewed commit.
type PoolSet struct {
	// Repo is the config repository (URL or path) and Branch its tracked
	// branch (default "main"); ReviewBranch, if set, receives the commit
	// instead of Branch.
	Repo         string
	Branch       string
	ReviewBranch string
	Pool         string
	// Set are the FIELD=VALUE assignments, applied in order.
	Set []pool.Assignment
	// Message says why, in the commit's body.
	Message     string
	Author      gitops.Signature
	RepoOptions []gitops.Option
	// Runtime, when set, is what the runtime serving the pool can apply
	// (its GET /v1/info limits): a result setting a limit it cannot apply
	// (not enforced and not accepted by spec.acceptUnenforced, or above
	// its maximum) is refused before anything is written, wrapping
	// ErrLimitUnavailable. Nil: the runtime refuses the pool at its start.
	Runtime *runtimeapi.LimitsInfo
}

// ErrLimitUnavailable marks a pool set whose result asks for a limit the
// runtime serving the pool said it cannot apply.
var ErrLimitUnavailable = errors.New("release: limit the runtime cannot apply")

// checkApplicable refuses p's limits that rt cannot apply, naming the
// pool, the limit and the reason the runtime gave.
func checkApplicable(p *pool.Pool, rt *runtimeapi.LimitsInfo) error {
	b, err := p.Spec.Limits.Bounds()
	if err != nil {
		return err
	}
	asked := map[string]uint64{pool.LimitCPU: b.CPUMillis, pool.LimitMemory: b.MemoryBytes, pool.LimitPids: b.Pids, pool.LimitOpenFiles: b.OpenFiles, pool.LimitWorkspace: b.WorkspaceBytes}
	var errs []error
	for _, name := range b.Set() {
		switch {
		case !slices.Contains(rt.Enforced, name) && !slices.Contains(p.Spec.AcceptUnenforced, name):
			why := rt.Unavailable
			if why == "" {
				why = "not among the limits it enforces"
			}
			errs = append(errs, fmt.Errorf("%w: pool %s: spec.limits.%s: the runtime cannot apply it (cgroup %s; %s), and spec.acceptUnenforced does not accept running without it", ErrLimitUnavailable, p.Metadata.Name, name, rt.Cgroup, why))
		case rt.Max[name] > 0 && asked[name] > rt.Max[name]:
			errs = append(errs, fmt.Errorf("%w: pool %s: spec.limits.%s: %d is above the %d the runtime can apply (%s)", ErrLimitUnavailable, p.Metadata.Name, name, asked[name], rt.Max[name], rt.How[name]))
		}
	}
	return errors.Join(errs...)
}

// PoolSetResult reports a PoolSet: Status Unchanged (and no commit) when
// every setting already had its value.
type PoolSetResult struct {
	*gitops.Result
	Pool    string        `json:"pool"`
	Changes []pool.Change `json:"changes"`
}

// SetPool changes settings of pools/<pool>/pool.yaml in one commit with
// Slipway-Pool and Slipway-Step: pool-set trailers, keeping the file's
// comments and key order. Every value, and then the whole resulting
// document, is validated before anything is written: a bad field or value
// is an error wrapping pool.ErrSetting, a result that does not validate
// pool.ErrInvalid, and nothing is committed. The edit is made in the object
// store and pushed with a compare-and-swap; a push that loses a race is
// re-applied to the new head (another writer's changes to other settings
// are kept). Settings that already have their values make no commit.
func SetPool(ctx context.Context, s PoolSet) (*PoolSetResult, error) {
	if !pool.ValidName(s.Pool) {
		return nil, fmt.Errorf("release: %q is not a pool name (lower-case letters, digits, '-')", s.Pool)
	}
	if len(s.Set) == 0 {
		return nil, fmt.Errorf("release: pool %s: %w: nothing to set (FIELD=VALUE: %s)", s.Pool, pool.ErrSetting, strings.Join(pool.Fields(), ", "))
	}
	// Check each value on its own before anything is fetched.
	def, err := pool.Marshal(pool.Default(s.Pool))
	if err != nil {
		return nil, err
	}
	if _, _, err := pool.Set(def, pool.PoolFile(s.Pool), s.Set); errors.Is(err, pool.ErrSetting) {
		return nil, fmt.Errorf("release: pool %s: %w", s.Pool, err)
	}
	if s.Branch == "" {
		s.Branch = "main"
	}
	repo, err := gitops.Open(ctx, s.Repo, s.RepoOptions...)
	if err != nil {
		return nil, err
	}
	out := &PoolSetResult{Pool: s.Pool}
	res, err := repo.Update(ctx, gitops.Request{
		Branch:     s.Branch,
		PushBranch: s.ReviewBranch,
		Author:     s.Author,
		Edit: func(t *gitops.Tree) (*gitops.Commit, error) {
			out.Changes = nil
			file := pool.PoolFile(s.Pool)
			b, err := readPoolFile(t, repo.URL(), s.Pool)
			if err != nil {
				return nil, err
			}
			nb, changes, err := pool.Set(b, file, s.Set)
			if err != nil {
				return nil, fmt.Errorf("release: pool %s: %w", s.Pool, err)
			}
			if s.Runtime != nil {
				p, err := pool.ParsePool(nb, s.Pool)
				if err != nil {
					return nil, fmt.Errorf("release: pool %s: %w", s.Pool, err)
				}
				if err := checkApplicable(p, s.Runtime); err != nil {
					return nil, err
				}
			}
			if len(changes) == 0 {
				return nil, nil
			}
			out.Changes = changes
			if err := t.WriteFile(file, nb); err != nil {
				return nil, err
			}
			return poolSetCommit(s, changes), nil
		},
	})
	if err != nil {
		return nil, err
	}
	out.Result = res
	if out.Changes == nil {
		out.Changes = []pool.Change{}
	}
	return out, nil
}

func poolSetCommit(s PoolSet, changes []pool.Change) *gitops.Commit {
	fields := make([]string, len(changes))
	lines := make([]string, len(changes))
	for i, c := range changes {
		fields[i], lines[i] = c.Field, c.String()
	}
	subject := fmt.Sprintf("%s: set %s", s.Pool, strings.Join(fields, ", "))
	if len(subject) > 72 {
		subject = fmt.Sprintf("%s: set %d pool settings", s.Pool, len(changes))
	}
	body := "Changed in " + pool.PoolFile(s.Pool) + ":\n" + strings.Join(lines, "\n")
	if m := strings.TrimSpace(s.Message); m != "" {
		body = m + "\n\n" + body
	}
	return &gitops.Commit{
		Subject:  subject,
		Body:     body,
		Trailers: []gitops.Trailer{{Key: "Slipway-Pool", Value: s.Pool}, {Key: "Slipway-Step", Value: "pool-set"}},
	}
}
