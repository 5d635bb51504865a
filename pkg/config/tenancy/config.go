package tenancy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/slipway-dev/slipway/internal/strictyaml"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
)

// Config is what one revision of the config repository says about tenants:
// every tenant and capability profile, and the price table.
type Config struct {
	// Revision is the commit read ("" for a branch with no commit yet).
	Revision string `json:"revision"`
	// Tenants and Profiles are keyed by name.
	Tenants  map[string]Versioned[Tenant]  `json:"tenants"`
	Profiles map[string]Versioned[Profile] `json:"profiles"`
	// Pricing is nil when the repository has no pricing.yaml: every price
	// is unknown.
	Pricing *Versioned[Pricing] `json:"pricing,omitempty"`
}

// Prices returns the price table, nil when there is none (a nil *Pricing's
// Rate says every price is unknown).
func (c *Config) Prices() *Pricing {
	if c == nil || c.Pricing == nil {
		return nil
	}
	return &c.Pricing.Value
}

// FromTree reads tenants/*.yaml, profiles/*.yaml and pricing.yaml from t,
// the tree of commit revision, parses each, and checks that every profile a
// tenant names exists. Any bad file is an error (wrapping ErrInvalid) naming
// the file and line: a configuration is taken whole or not at all. Files in
// those folders not ending in .yaml are ignored, except .yml, refused.
func FromTree(t *gitops.Tree, revision string) (*Config, error) {
	c := &Config{Revision: revision, Tenants: map[string]Versioned[Tenant]{}, Profiles: map[string]Versioned[Profile]{}}
	if err := readDir(t, TenantsDir, revision, func(p string, b []byte) error {
		v, err := ParseTenant(p, b)
		if err != nil {
			return err
		}
		c.Tenants[v.Name] = versioned(*v, p, revision, b)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := readDir(t, ProfilesDir, revision, func(p string, b []byte) error {
		v, err := ParseProfile(p, b)
		if err != nil {
			return err
		}
		c.Profiles[v.Name] = versioned(*v, p, revision, b)
		return nil
	}); err != nil {
		return nil, err
	}
	b, err := t.ReadFile(PricingFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("%s@%s: %w", PricingFile, short(revision), err)
	default:
		p, err := ParsePricing(PricingFile, b)
		if err != nil {
			return nil, err
		}
		v := versioned(*p, PricingFile, revision, b)
		c.Pricing = &v
	}
	if err := c.Check(); err != nil {
		return nil, err
	}
	return c, nil
}

// readDir parses each .yaml file directly in dir with parse.
func readDir(t *gitops.Tree, dir, revision string, parse func(p string, b []byte) error) error {
	list, err := t.List(dir)
	if err != nil {
		return fmt.Errorf("%s@%s: %w", dir, short(revision), err)
	}
	for _, name := range list {
		p := path.Join(dir, name)
		if strings.HasSuffix(name, ".yml") {
			return fmt.Errorf("%s: %w: name it %s.yaml", p, ErrInvalid, strings.TrimSuffix(name, ".yml"))
		}
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		b, err := t.ReadFile(p)
		if err != nil {
			return fmt.Errorf("%s@%s: %w", p, short(revision), err)
		}
		if err := parse(p, b); err != nil {
			return err
		}
	}
	return nil
}

// Check checks the cross-references between the documents: every profile
// a tenant names exists. The error wraps ErrInvalid and names the tenant's
// file and line.
func (c *Config) Check() error {
	for _, name := range sortedKeys(c.Tenants) {
		t := c.Tenants[name]
		for i, p := range t.Value.Profiles {
			if _, ok := c.Profiles[p]; ok {
				continue
			}
			field := fmt.Sprintf("profiles[%d]", i)
			var d tenantDoc
			doc, _ := strictyaml.Decode(t.Raw, &d) // parsed before: only for the line
			return fieldError(t.Path, doc, field, "profile %q does not exist (no %s)", p, ProfileFile(p))
		}
	}
	return nil
}

// Authorize says whether tenant may run a job with profile on pool: nil,
// or an error naming what is not allowed: ErrNotFound for a tenant or
// profile that does not exist, ErrForbidden for a profile not in the
// tenant's profiles, a pool not in the tenant's pools, or a pool the
// profile does not allow.
func (c *Config) Authorize(tenant, profile, pool string) error {
	if c == nil {
		return fmt.Errorf("tenant %q: %w (no configuration loaded)", tenant, ErrNotFound)
	}
	t, ok := c.Tenants[tenant]
	if !ok {
		return fmt.Errorf("tenant %q: %w (no %s at %s)", tenant, ErrNotFound, TenantFile(tenant), short(c.Revision))
	}
	at := fmt.Sprintf("%s@%s", t.Path, short(t.Revision))
	if !slices.Contains(t.Value.Profiles, profile) {
		return fmt.Errorf("tenant %s: %w: may not use profile %q (allowed: %s; %s)", tenant, ErrForbidden, profile, strings.Join(t.Value.Profiles, ", "), at)
	}
	if !slices.Contains(t.Value.Pools, pool) {
		return fmt.Errorf("tenant %s: %w: may not use pool %q (allowed: %s; %s)", tenant, ErrForbidden, pool, strings.Join(t.Value.Pools, ", "), at)
	}
	p, ok := c.Profiles[profile]
	if !ok {
		return fmt.Errorf("profile %q: %w (no %s at %s)", profile, ErrNotFound, ProfileFile(profile), short(c.Revision))
	}
	if !p.Value.AllowsPool(pool) {
		return fmt.Errorf("profile %s: %w: does not run on pool %q (allowed: %s; %s@%s)", profile, ErrForbidden, pool, strings.Join(p.Value.Pools, ", "), p.Path, short(p.Revision))
	}
	return nil
}

// Profile change states, as ProfileChange reports them.
const (
	ProfileUnchanged = "unchanged"
	ProfileChanged   = "changed"
	ProfileDeleted   = "deleted"
)

// ProfileChange says what became of profile name, recorded by a job with
// digest, in this configuration: unchanged (same bytes), changed or
// deleted. A queued or running job keeps the profile it recorded; this is
// what the job should say happened since.
func (c *Config) ProfileChange(name, digest string) string {
	p, ok := c.Profiles[name]
	switch {
	case !ok:
		return ProfileDeleted
	case p.Digest != digest:
		return ProfileChanged
	}
	return ProfileUnchanged
}

// Load reads branch's head of repo and returns its Config (FromTree).
func Load(ctx context.Context, repo *gitops.Repo, branch string) (*Config, error) {
	t, rev, err := repo.Snapshot(ctx, branch)
	if err != nil {
		return nil, err
	}
	return FromTree(t, rev)
}

// ProfileAt returns profile name as it was at commit revision of branch,
// even if the file changed or was deleted since: how an old job is
// interpreted. A profile absent at that revision, or a revision not on
// branch, is ErrNotFound. Reading an older revision needs the full
// history: open repo WithDepth(0).
func ProfileAt(ctx context.Context, repo *gitops.Repo, branch, revision, name string) (*Versioned[Profile], error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("profile %q: %w: not a profile name", name, ErrNotFound)
	}
	t, rev, err := repo.SnapshotAt(ctx, branch, revision)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("profile %s@%s: %w: %w", name, short(revision), ErrNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	p := ProfileFile(name)
	b, err := t.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("profile %s: %w: no %s at %s", name, ErrNotFound, p, short(rev))
	}
	if err != nil {
		return nil, fmt.Errorf("%s@%s: %w", p, short(rev), err)
	}
	v, err := ParseProfile(p, b)
	if err != nil {
		return nil, fmt.Errorf("at %s: %w", short(rev), err)
	}
	out := versioned(*v, p, rev, b)
	return &out, nil
}

// short abbreviates a commit id for messages.
func short(rev string) string {
	switch {
	case rev == "":
		return "(no commit)"
	case len(rev) > 12:
		return rev[:12]
	}
	return rev
}
