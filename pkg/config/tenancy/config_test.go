package tenancy_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/tenancy"
	"github.com/slipway-dev/slipway/testharness/gittest"
)

const (
	globex = `apiVersion: slipway.dev/v1alpha1
kind: Tenant
name: globex
pools: [agents, gpu]
profiles: [short]
concurrency: 1
queueBound: 200
`
	short = `apiVersion: slipway.dev/v1alpha1
kind: Profile
name: short
network: {mode: deny}
maxDuration: 5s
output: {maxBytes: 1024, maxLines: 10}
`
)

// seed makes a config repository holding acme and globex, the standard and
// short profiles and the price table, and opens it with its full history.
func seed(t *testing.T) (*gitops.Repo, *gittest.Server) {
	t.Helper()
	srv := gittest.NewServer(t)
	url := srv.Seed(t, "config.git", "main", map[string]string{
		"pools/agents/pool.yaml": "kind: Pool\n",
		"tenants/acme.yaml":      testdata(t, "tenant.yaml"),
		"tenants/globex.yaml":    globex,
		"tenants/README.md":      "not a tenant\n",
		"profiles/standard.yaml": testdata(t, "profile.yaml"),
		"profiles/short.yaml":    short,
		"pricing.yaml":           testdata(t, "pricing.yaml"),
	})
	repo, err := gitops.Open(context.Background(), url, gitops.WithDepth(0))
	if err != nil {
		t.Fatal(err)
	}
	return repo, srv
}

func update(t *testing.T, repo *gitops.Repo, subject string, edit func(*gitops.Tree) error) string {
	t.Helper()
	res, err := repo.Update(context.Background(), gitops.Request{Branch: "main", Author: gitops.Signature{Name: "t", Email: "t@example.invalid"},
		Edit: func(tr *gitops.Tree) (*gitops.Commit, error) {
			if err := edit(tr); err != nil {
				return nil, err
			}
			return &gitops.Commit{Subject: subject}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Commit
}

func TestLoad(t *testing.T) {
	repo, _ := seed(t)
	c, err := tenancy.Load(context.Background(), repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Revision) != 40 || len(c.Tenants) != 2 || len(c.Profiles) != 2 || c.Pricing == nil {
		t.Fatalf("config = %+v", c)
	}
	acme := c.Tenants["acme"]
	if acme.Path != "tenants/acme.yaml" || acme.Revision != c.Revision || string(acme.Raw) != testdata(t, "tenant.yaml") ||
		acme.Digest != tenancy.Digest([]byte(testdata(t, "tenant.yaml"))) || !strings.HasPrefix(acme.Digest, "sha256:") || len(acme.Digest) != 71 {
		t.Errorf("acme = %+v", acme)
	}
	if acme.Value.Budget == nil || acme.Value.Budget.Amount != 5 || c.Tenants["globex"].Value.Budget != nil {
		t.Errorf("budgets: %+v %+v", acme.Value.Budget, c.Tenants["globex"].Value.Budget)
	}
	if p := c.Profiles["short"]; p.Value.MaxDuration != 5*time.Second || p.Path != "profiles/short.yaml" {
		t.Errorf("short = %+v", p)
	}
	if r, ok := c.Prices().Rate("agents"); !ok || r.Active != 1 {
		t.Errorf("Rate(agents) = %+v, %v", r, ok)
	}
	if _, ok := c.Prices().Rate("gpu"); ok {
		t.Error("gpu is not in the price table: its price must be unknown")
	}

	// No pricing.yaml: every price unknown, not zero.
	update(t, repo, "drop prices", func(tr *gitops.Tree) error { return tr.Remove("pricing.yaml") })
	c, err = tenancy.Load(context.Background(), repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Prices().Rate("agents"); ok || c.Pricing != nil {
		t.Errorf("without pricing.yaml: %+v", c.Pricing)
	}
}

func TestLoadRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*gitops.Tree) error
		want string
	}{
		// The tenant's profiles list is line 5: standard, short; short is [1].
		"tenant names a missing profile": {func(tr *gitops.Tree) error { return tr.Remove("profiles/short.yaml") },
			`tenants/acme.yaml:5: profiles[1]: invalid document: profile "short" does not exist (no profiles/short.yaml)`},
		"bad tenant file": {func(tr *gitops.Tree) error {
			return tr.WriteFile("tenants/globex.yaml", []byte(strings.Replace(globex, "concurrency: 1", "concurrency: 0", 1)))
		}, "tenants/globex.yaml:6: concurrency: invalid document: 0: want 1 or more running jobs"},
		"bad profile file": {func(tr *gitops.Tree) error {
			return tr.WriteFile("profiles/short.yaml", []byte(short+"extra: 1\n"))
		}, "profiles/short.yaml:7: invalid document: unknown field \"extra\""},
		"bad pricing": {func(tr *gitops.Tree) error {
			return tr.WriteFile("pricing.yaml", []byte(strings.Replace(testdata(t, "pricing.yaml"), "agents: standard", "agents: gold", 1)))
		}, `pricing.yaml:10: pools.agents: invalid document: class "gold" is not in classes`},
		"a .yml tenant": {func(tr *gitops.Tree) error { return tr.WriteFile("tenants/initech.yml", []byte(globex)) },
			"tenants/initech.yml: invalid document: name it initech.yaml"},
		"file named for another tenant": {func(tr *gitops.Tree) error { return tr.WriteFile("tenants/initech.yaml", []byte(globex)) },
			`tenants/initech.yaml:3: name: invalid document: "globex" differs from the file's name "initech"`},
	} {
		t.Run(name, func(t *testing.T) {
			repo, _ := seed(t)
			update(t, repo, name, tc.edit)
			_, err := tenancy.Load(context.Background(), repo, "main")
			if !errors.Is(err, tenancy.ErrInvalid) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestProfileAt(t *testing.T) {
	ctx := context.Background()
	repo, srv := seed(t)
	c1, err := tenancy.Load(ctx, repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	rev1 := c1.Revision
	old := c1.Profiles["short"]

	// The profile changes: the old revision still gives the old profile.
	changed := strings.Replace(short, "maxDuration: 5s", "maxDuration: 10s", 1)
	rev2 := update(t, repo, "short: 10s", func(tr *gitops.Tree) error { return tr.WriteFile("profiles/short.yaml", []byte(changed)) })
	check := func(rev string, want tenancy.Versioned[tenancy.Profile]) {
		t.Helper()
		// A fresh clone each time, as a restarted control plane would read it.
		fresh, err := gitops.Open(ctx, srv.URL("config.git"), gitops.WithDepth(0))
		if err != nil {
			t.Fatal(err)
		}
		got, err := tenancy.ProfileAt(ctx, fresh, "main", rev, "short")
		if err != nil {
			t.Fatal(err)
		}
		if got.Revision != rev || got.Digest != want.Digest || string(got.Raw) != string(want.Raw) ||
			got.Value.MaxDuration != want.Value.MaxDuration || got.Path != "profiles/short.yaml" {
			t.Errorf("ProfileAt(%s) = %+v\nwant %+v", rev, got, want)
		}
	}
	check(rev1, old)
	c2, err := tenancy.Load(ctx, repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	if c2.Profiles["short"].Digest == old.Digest || c2.Profiles["short"].Value.MaxDuration != 10*time.Second {
		t.Fatalf("head profile = %+v", c2.Profiles["short"])
	}
	check(rev2, c2.Profiles["short"])
	if got := c2.ProfileChange("short", old.Digest); got != tenancy.ProfileChanged {
		t.Errorf("ProfileChange(old digest) = %s", got)
	}
	if got := c2.ProfileChange("short", c2.Profiles["short"].Digest); got != tenancy.ProfileUnchanged {
		t.Errorf("ProfileChange(head digest) = %s", got)
	}

	// The profile is deleted (and no tenant names it any more): both old
	// revisions still answer; the head says not found.
	head := update(t, repo, "drop short", func(tr *gitops.Tree) error {
		if err := tr.Remove("profiles/short.yaml"); err != nil {
			return err
		}
		if err := tr.WriteFile("tenants/acme.yaml", []byte(strings.Replace(testdata(t, "tenant.yaml"), "[standard, short]", "[standard]", 1))); err != nil {
			return err
		}
		return tr.Remove("tenants/globex.yaml")
	})
	check(rev1, old)
	check(rev2, c2.Profiles["short"])
	c3, err := tenancy.Load(ctx, repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	if got := c3.ProfileChange("short", old.Digest); got != tenancy.ProfileDeleted {
		t.Errorf("ProfileChange after deletion = %s", got)
	}
	if _, err := tenancy.ProfileAt(ctx, repo, "main", head, "short"); !errors.Is(err, tenancy.ErrNotFound) ||
		!strings.Contains(err.Error(), "no profiles/short.yaml at "+head[:12]) {
		t.Errorf("deleted profile at head: %v", err)
	}
	if _, err := tenancy.ProfileAt(ctx, repo, "main", strings.Repeat("ab", 20), "short"); !errors.Is(err, tenancy.ErrNotFound) {
		t.Errorf("revision not on the branch: %v", err)
	}
	if _, err := tenancy.ProfileAt(ctx, repo, "main", rev1, "../tenants/acme"); !errors.Is(err, tenancy.ErrNotFound) {
		t.Errorf("a path for a name: %v", err)
	}
}

func TestAuthorize(t *testing.T) {
	repo, _ := seed(t)
	c, err := tenancy.Load(context.Background(), repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tenant, profile, pool string
		want                  error
		msg                   string
	}{
		{"acme", "standard", "agents", nil, ""},
		{"acme", "short", "agents", nil, ""},
		{"globex", "short", "gpu", nil, ""}, // short allows any pool
		{"initech", "short", "agents", tenancy.ErrNotFound, `tenant "initech": not found (no tenants/initech.yaml`},
		{"globex", "standard", "agents", tenancy.ErrForbidden, `tenant globex: forbidden: may not use profile "standard" (allowed: short; tenants/globex.yaml@`},
		{"acme", "short", "gpu", tenancy.ErrForbidden, `tenant acme: forbidden: may not use pool "gpu" (allowed: agents; tenants/acme.yaml@`},
		{"acme", "gpu-heavy", "agents", tenancy.ErrForbidden, `may not use profile "gpu-heavy"`},
	} {
		err := c.Authorize(tc.tenant, tc.profile, tc.pool)
		if tc.want == nil {
			if err != nil {
				t.Errorf("Authorize(%s, %s, %s) = %v", tc.tenant, tc.profile, tc.pool, err)
			}
			continue
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Authorize(%s, %s, %s) = %v\nwant %v: %s", tc.tenant, tc.profile, tc.pool, err, tc.want, tc.msg)
		}
	}

	var none *tenancy.Config
	if err := none.Authorize("acme", "standard", "agents"); !errors.Is(err, tenancy.ErrNotFound) {
		t.Errorf("no configuration: %v", err)
	}

	// A profile limited to pools: globex may use gpu, the profile may not.
	update(t, repo, "short on agents only", func(tr *gitops.Tree) error {
		return tr.WriteFile("profiles/short.yaml", []byte(short+"pools: [agents]\n"))
	})
	c, err = tenancy.Load(context.Background(), repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	err = c.Authorize("globex", "short", "gpu")
	if !errors.Is(err, tenancy.ErrForbidden) || !strings.Contains(err.Error(), `profile short: forbidden: does not run on pool "gpu" (allowed: agents; profiles/short.yaml@`) {
		t.Errorf("profile's pools: %v", err)
	}
	if err := c.Authorize("globex", "short", "agents"); err != nil {
		t.Errorf("globex short agents: %v", err)
	}
}

// TestDemoConfig loads the demo's control-plane config
// (examples/demo/control) from a real repository, as the demo commits it.
func TestDemoConfig(t *testing.T) {
	root := filepath.Join("..", "..", "..", "examples", "demo", "control")
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := gittest.NewServer(t)
	repo, err := gitops.Open(context.Background(), srv.Seed(t, "config.git", "main", files))
	if err != nil {
		t.Fatal(err)
	}
	c, err := tenancy.Load(context.Background(), repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	acme, globex := c.Tenants["acme"].Value, c.Tenants["globex"].Value
	if acme.Concurrency != 2 || acme.QueueBound != 20 || *acme.Budget != (tenancy.Budget{Amount: 5, Period: "day"}) ||
		globex.Concurrency != 2 || globex.QueueBound != 4 || *globex.Budget != (tenancy.Budget{Amount: 1, Period: "day"}) {
		t.Errorf("tenants: %+v %+v", acme, globex)
	}
	std, short := c.Profiles["standard"].Value, c.Profiles["short"].Value
	if std.Network.Mode != "deny" || std.MaxDuration != 2*time.Minute || std.MaxCommandDuration != time.Minute ||
		std.MaxOutputBytes != 64<<10 || std.MaxOutputLines != 2000 || short.MaxDuration != 5*time.Second {
		t.Errorf("profiles: %+v %+v", std, short)
	}
	if r, ok := c.Prices().Rate("agents"); !ok || !reflect.DeepEqual(r, tenancy.Rates{Warm: ptr(0.1), Active: 1, Storage: ptr(0.01)}) || c.Pricing.Value.Currency != "credits" {
		t.Errorf("agents' rates: %+v, %v", r, ok)
	}
	for _, tn := range []string{"acme", "globex"} {
		for _, p := range []string{"standard", "short"} {
			if err := c.Authorize(tn, p, "agents"); err != nil {
				t.Error(err)
			}
		}
	}
}
