package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/release"
	"github.com/slipway-dev/slipway/pkg/release/policy"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/gittest"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

type fixture struct {
	t    *testing.T
	host string
	sv   signature.SignerVerifier
	pol  []byte
	url  string
	git  *gittest.Server
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, host: registrytest.NewInProcess(t), git: gittest.NewServer(t)}
	priv, pub, err := sign.GenerateKeys([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	if f.sv, err = sign.LoadSigner(priv, []byte("pw")); err != nil {
		t.Fatal(err)
	}
	f.pol = []byte(`apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: agents}
spec:
  transparencyLog: none
  keys: [{name: release, publicKeyFile: release.pub}]
  rules: [{name: images, signatures: {keys: [release]}}]
`)
	f.url = f.git.InitBare(t, "config.git", "main")
	if _, err := release.InitConfig(context.Background(), f.url, "main", "agents",
		map[string][]byte{pool.PolicyPath: f.pol, "policies/release.pub": pub}, gitops.Signature{}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) image(repo string, signed bool) string {
	f.t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		f.t.Fatal(err)
	}
	d := registrytest.Push(f.t, f.host+"/"+repo+":v1", img)
	if signed {
		if _, err := sign.Sign(context.Background(), d, f.sv, sign.WithOfflineNoTlog()); err != nil {
			f.t.Fatal(err)
		}
	}
	return f.host + "/" + repo + "@" + d.DigestStr()
}

// promote promotes a generation of pool agents with three signed images
// (promote verifies them against the repository's policy).
func (f *fixture) promote(activate bool, from *generation.Generation) *generation.Generation {
	f.t.Helper()
	pins := map[generation.Kind]generation.Pin{
		generation.ControlPlane:      {Image: f.image("platform/cp", true)},
		generation.Runner:            {Image: f.image("platform/runner", true)},
		generation.WorkspaceTemplate: {Image: f.image("templates/tools", true)},
	}
	var compat *generation.Compatibility
	if from == nil {
		compat = &generation.Compatibility{ControlPlaneProtocol: generation.Range{Min: 1, Max: 1}, RunnerProtocol: generation.Range{Min: 1, Max: 1}}
	}
	g, err := generation.New("agents", from, pins, compat)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := release.Promote(context.Background(), release.Promotion{Repo: f.url, Generation: g, Activate: activate}); err != nil {
		f.t.Fatal(err)
	}
	return g
}

func TestLoadAndSync(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	g1 := f.promote(true, nil)
	repo, err := gitops.Open(ctx, f.url)
	if err != nil {
		t.Fatal(err)
	}
	s := runtime.NewSyncer(repo, "main", runtime.Verify{}, time.Hour)
	if !s.Stale(time.Minute) {
		t.Error("a syncer that never synced is not stale")
	}
	d, err := s.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	head := gittest.Git(t, f.git.Dir("config.git"), "rev-parse", "main")
	p := d.Pools["agents"]
	if d.Revision != head || p == nil {
		t.Fatalf("desired %+v at %s, want pool agents at %s", d, d.Revision, head)
	}
	// The policy verified against is the repository's, read at head.
	if d.PolicyRevision != head {
		t.Errorf("policy revision %q, want the commit it was read at, %s", d.PolicyRevision, head)
	}
	if a, ok := p.Active(); !ok || a.ID != g1.ID || len(p.Warm()) != 1 || len(p.Refused) != 0 {
		t.Fatalf("pool: active %v %v, warm %d, refused %v", a, ok, len(p.Warm()), p.Refused)
	}
	if s.Stale(time.Minute) {
		t.Error("stale right after a sync")
	}

	// A new target does not change what is warm: only a rollout does.
	f.promote(false, g1)
	d2, err := s.Sync(ctx)
	if err != nil || d2.Revision == d.Revision {
		t.Fatalf("second sync: %v, revision %s", err, d2.Revision)
	}
	if a, _ := d2.Pools["agents"].Active(); a.ID != g1.ID {
		t.Errorf("active changed to %s on a promote", a.ID)
	}
}

// TestUnverifiedGenerationRefused: a generation the state names whose
// runner is not signed is refused by the runtime, with the reason, even
// though it reached the repository (here written without verification).
func TestUnverifiedGenerationRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pins := map[generation.Kind]generation.Pin{
		generation.ControlPlane:      {Image: f.image("platform/cp", true)},
		generation.Runner:            {Image: f.image("platform/evil-runner", false)},
		generation.WorkspaceTemplate: {Image: f.image("templates/tools", true)},
	}
	g, err := generation.New("agents", nil, pins, &generation.Compatibility{ControlPlaneProtocol: generation.Range{Min: 1, Max: 1}, RunnerProtocol: generation.Range{Min: 1, Max: 1}})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := generation.Marshal(g)
	repo, _ := gitops.Open(ctx, f.url)
	// Someone bypasses promote and writes the state by hand.
	if _, err := repo.Update(ctx, gitops.Request{Branch: "main", Edit: func(tr *gitops.Tree) (*gitops.Commit, error) {
		st := pool.NewState("agents")
		st.Target = g.ID
		st.Generations = []pool.GenState{{ID: g.ID, Sequence: 1, State: pool.Active, WarmSize: 1, Since: time.Now().UTC().Truncate(time.Second)}}
		b, _ := pool.Marshal(st)
		if err := tr.WriteFile(pool.StateFile("agents"), b); err != nil {
			return nil, err
		}
		return &gitops.Commit{Subject: "by hand"}, tr.WriteFile(pool.GenerationFile("agents", g.ID), doc)
	}}); err != nil {
		t.Fatal(err)
	}
	tree, rev, err := repo.Snapshot(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	d, err := runtime.Load(ctx, tree, rev, runtime.Verify{})
	if err != nil {
		t.Fatal(err)
	}
	p := d.Pools["agents"]
	if _, ok := p.Active(); ok || len(p.Warm()) != 0 {
		t.Fatal("an unverified generation is active or warm")
	}
	if why := p.Refused[g.ID]; !strings.Contains(why, "refused by the verification policy") || !strings.Contains(why, "evil-runner") {
		t.Errorf("refusal reason %q", why)
	}
	// A policy given instead of the repository's does not replace it.
	other, _ := policy.Parse([]byte("apiVersion: slipway.dev/v1alpha1\nkind: VerificationPolicy\nmetadata: {name: lax}\nspec:\n  transparencyLog: none\n  rules: [{name: all, allowUnverified: true}]\n"))
	d, _ = runtime.Load(ctx, tree, rev, runtime.Verify{Policy: other})
	if _, ok := d.Pools["agents"].Active(); ok {
		t.Error("a policy from outside overrode the config repository's")
	}
	if d.PolicyRevision != rev {
		t.Errorf("policy revision %q, want the repository's at %s", d.PolicyRevision, rev)
	}
}

// TestPolicyRevisionWithoutRepoPolicy: with no policy in the repository,
// the policy given is the one verified against, named by its digest;
// skipping verification leaves the revision empty.
func TestPolicyRevisionWithoutRepoPolicy(t *testing.T) {
	ctx := context.Background()
	git := gittest.NewServer(t)
	url := git.InitBare(t, "config.git", "main")
	if _, err := release.InitConfig(ctx, url, "main", "agents", nil, gitops.Signature{}); err != nil {
		t.Fatal(err)
	}
	repo, err := gitops.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	tree, rev, err := repo.Snapshot(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	lax, err := policy.Parse([]byte("apiVersion: slipway.dev/v1alpha1\nkind: VerificationPolicy\nmetadata: {name: lax}\nspec:\n  transparencyLog: none\n  rules: [{name: all, allowUnverified: true}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := runtime.Load(ctx, tree, rev, runtime.Verify{Policy: lax})
	if err != nil {
		t.Fatal(err)
	}
	if d.PolicyRevision != lax.Digest || !strings.HasPrefix(d.PolicyRevision, "sha256:") {
		t.Errorf("policy revision %q, want the given policy's digest %s", d.PolicyRevision, lax.Digest)
	}
	if d, err = runtime.Load(ctx, tree, rev, runtime.Verify{Skip: true}); err != nil || d.PolicyRevision != "" {
		t.Errorf("skipped verification: policy revision %q, %v", d.PolicyRevision, err)
	}
}
