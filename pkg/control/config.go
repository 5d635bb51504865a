package control

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/tenancy"
)

// RepoConfig reads tenants, profiles and prices from the config
// repository's branch, at most once per refresh interval; a failed read
// keeps serving the last good configuration (and says so in Err).
type RepoConfig struct {
	repo    *gitops.Repo
	branch  string
	refresh time.Duration

	// Log, when set, is told of a refresh that failed (once per error).
	Log *slog.Logger

	mu      sync.Mutex
	tell    func(err error) // logs a failed refresh instead of Log (setTell)
	cur     *tenancy.Config
	at      time.Time
	lastErr error
}

var _ ConfigSource = (*RepoConfig)(nil)

// NewRepoConfig reads repo's branch every refresh (default 5s).
func NewRepoConfig(repo *gitops.Repo, branch string, refresh time.Duration) *RepoConfig {
	if refresh <= 0 {
		refresh = 5 * time.Second
	}
	return &RepoConfig{repo: repo, branch: branch, refresh: refresh}
}

// Current returns the configuration in effect.
func (r *RepoConfig) Current(ctx context.Context) (*tenancy.Config, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil && time.Since(r.at) < r.refresh {
		return r.cur, nil
	}
	c, err := tenancy.Load(ctx, r.repo, r.branch)
	r.at = time.Now()
	if err != nil {
		if r.Log != nil && (r.lastErr == nil || r.lastErr.Error() != err.Error()) {
			rev := ""
			if r.cur != nil {
				rev = r.cur.Revision
			}
			if r.tell != nil {
				r.tell(err)
			} else {
				r.Log.Error("config repository: keeping the last good configuration", "revision", rev, "err", err)
			}
		}
		r.lastErr = err
		if r.cur != nil {
			return r.cur, nil
		}
		return nil, err
	}
	r.cur, r.lastErr = c, nil
	return c, nil
}

// setTell makes tell log each failed refresh (once per error, as Log
// would): the plane's readiness, which logs it under the id /readyz names.
func (r *RepoConfig) setTell(tell func(err error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tell = tell
}

// Err is the last refresh's error, nil when the configuration is current.
func (r *RepoConfig) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

// ProfileAt reads a profile as it was at revision.
func (r *RepoConfig) ProfileAt(ctx context.Context, revision, name string) (*tenancy.Versioned[tenancy.Profile], error) {
	return tenancy.ProfileAt(ctx, r.repo, r.branch, revision, name)
}
