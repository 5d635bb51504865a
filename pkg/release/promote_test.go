package release_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/release"
	"github.com/slipway-dev/slipway/pkg/release/policy"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/gittest"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// world is a registry with signed images, a policy requiring the release
// key, and a config repository served over HTTP.
type world struct {
	t      *testing.T
	host   string
	sv     signature.SignerVerifier
	policy *policy.Policy
	git    *gittest.Server
	repo   string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, host: registrytest.NewInProcess(t), git: gittest.NewServer(t)}
	priv, pub, err := sign.GenerateKeys([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	if w.sv, err = sign.LoadSigner(priv, []byte("pw")); err != nil {
		t.Fatal(err)
	}
	w.policy, err = policy.Parse([]byte(`apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: agents}
spec:
  transparencyLog: none
  keys:
    - name: release
      publicKey: |
        ` + strings.ReplaceAll(strings.TrimSpace(string(pub)), "\n", "\n        ") + `
  rules:
    - name: images
      signatures: {keys: [release]}
`))
	if err != nil {
		t.Fatal(err)
	}
	w.repo = w.git.InitBare(t, "config.git", "main")
	return w
}

// image pushes a random image to repo:tag and signs it (unless unsigned).
func (w *world) image(repo, tag string, signed bool) string {
	w.t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		w.t.Fatal(err)
	}
	if img, err = withKindLabels(img, repo); err != nil {
		w.t.Fatal(err)
	}
	d := registrytest.Push(w.t, w.host+"/"+repo+":"+tag, img)
	if signed {
		if _, err := sign.Sign(context.Background(), d, w.sv, sign.WithOfflineNoTlog()); err != nil {
			w.t.Fatal(err)
		}
	}
	return w.host + "/" + repo + ":" + tag + "@" + d.DigestStr()
}

func (w *world) gen(from *generation.Generation, pins map[generation.Kind]string) *generation.Generation {
	w.t.Helper()
	ps := map[generation.Kind]generation.Pin{}
	for k, v := range pins {
		ps[k] = generation.Pin{Image: v}
	}
	var compat *generation.Compatibility
	if from == nil {
		compat = &generation.Compatibility{ControlPlaneProtocol: generation.Range{Min: 1, Max: 2}, RunnerProtocol: generation.Range{Min: 1, Max: 1}}
	}
	g, err := release.CreateGeneration(context.Background(), release.NewGeneration{Pool: "agents", From: from, Pins: ps, Compat: compat, Verify: release.Verifier{Policy: w.policy}})
	if err != nil {
		w.t.Fatal(err)
	}
	return g
}

// first is the pool's first generation: control plane, runner and template,
// all signed.
func (w *world) first() *generation.Generation {
	w.t.Helper()
	return w.gen(nil, map[generation.Kind]string{
		generation.ControlPlane:      w.image("platform/cp", "v1", true),
		generation.Runner:            w.image("platform/runner", "v1", true),
		generation.WorkspaceTemplate: w.image("templates/tools", "v1", true),
	})
}

func (w *world) promote(g *generation.Generation, mod func(*release.Promotion)) (*release.PromoteResult, error) {
	p := release.Promotion{Repo: w.repo, Generation: g, Policy: w.policy, Author: gitops.Signature{Name: "ci", Email: "ci@example.invalid"}}
	if mod != nil {
		mod(&p)
	}
	return release.Promote(context.Background(), p)
}

func TestPromoteFlow(t *testing.T) {
	w := newWorld(t)
	dir := w.git.Dir("config.git")
	g1 := w.first()
	if g1.Verification == nil || len(g1.Verification.Artifacts) != 3 || g1.Verification.Policy.Digest != w.policy.Digest {
		t.Fatalf("verification record %+v", g1.Verification)
	}

	// First promotion creates the pool's folder and activates.
	res, err := w.promote(g1, func(p *release.Promotion) { p.Activate = true })
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != gitops.Committed || !res.Activated {
		t.Fatalf("%+v", res)
	}
	gittest.Git(t, dir, "fsck", "--strict", "--no-dangling")
	files := gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "main")
	for _, f := range []string{pool.PoolFile("agents"), pool.StateFile("agents"), pool.KustomizationFile("agents"), pool.GenerationFile("agents", g1.ID)} {
		if !strings.Contains(files, f) {
			t.Errorf("%s missing from\n%s", f, files)
		}
	}
	msg := gittest.Git(t, dir, "log", "-1", "--format=%B", "main")
	for _, want := range []string{"agents: promote " + g1.ID + " (sequence 1)", "runner: " + g1.Pins[generation.Runner].Image, "Slipway-Pool: agents", "Slipway-Generation: " + g1.ID, "Slipway-Step: promote"} {
		if !strings.Contains(msg, want) {
			t.Errorf("commit message lacks %q:\n%s", want, msg)
		}
	}
	kust := gittest.Git(t, dir, "show", "main:"+pool.KustomizationFile("agents"))
	if !strings.Contains(kust, "name: slipway/runner") || !strings.Contains(kust, "digest: "+strings.SplitN(g1.Pins[generation.Runner].Image, "@", 2)[1]) || !strings.Contains(kust, "# Images of pool agents") {
		t.Errorf("kustomization:\n%s", kust)
	}

	// Repeat: already the target, nothing committed.
	if again, err := w.promote(g1, func(p *release.Promotion) { p.Activate = true }); err != nil || again.Status != gitops.Unchanged {
		t.Fatalf("repeat: %+v, %v", again, err)
	}

	// A second generation: only the runner changes.
	g2 := w.gen(g1, map[generation.Kind]string{generation.Runner: w.image("platform/runner", "v2", true)})
	if res, err = w.promote(g2, nil); err != nil || res.Previous != g1.ID {
		t.Fatalf("g2: %+v, %v", res, err)
	}
	msg = gittest.Git(t, dir, "log", "-1", "--format=%B", "main")
	if !strings.Contains(msg, "Changed from "+g1.ID) || !strings.Contains(msg, "runner: ") || strings.Contains(msg, "controlPlane:") {
		t.Errorf("g2 message lists the wrong pins:\n%s", msg)
	}
	state, _ := pool.ParseState([]byte(gittest.Git(t, dir, "show", "main:"+pool.StateFile("agents"))), "desired.yaml")
	if a, _ := state.Active(); state.Target != g2.ID || a.ID != g1.ID {
		t.Errorf("state: target %s active %s; want target g2, active g1 (a rollout changes active)", state.Target, a.ID)
	}

	// Back to g1: a rollback, refused without the flag.
	_, err = w.promote(g1, nil)
	if !errors.Is(err, release.ErrRollbackNeeded) || !strings.Contains(err.Error(), "--rollback") {
		t.Fatalf("older generation without --rollback: %v", err)
	}
	if res, err = w.promote(g1, func(p *release.Promotion) { p.Rollback = true }); err != nil || !res.Rollback {
		t.Fatalf("rollback: %+v, %v", res, err)
	}
	if msg := gittest.Git(t, dir, "log", "-1", "--format=%B", "main"); !strings.Contains(msg, "roll back to "+g1.ID) || !strings.Contains(msg, "Slipway-Step: rollback") {
		t.Errorf("rollback message:\n%s", msg)
	}
	// Automation re-running the promotion of g2 cannot undo the rollback.
	if _, err := w.promote(g2, nil); !errors.Is(err, release.ErrRollbackNeeded) {
		t.Fatalf("re-promoting g2 after a rollback to g1: %v, want a refusal", err)
	}
	// g1's file is never rewritten with other content.
	g1again := *g1
	g1again.Sequence = 9 // not hashed: same id, other bytes
	if _, err := w.promote(&g1again, func(p *release.Promotion) { p.Rollback = true }); !errors.Is(err, gitops.ErrConflict) || !strings.Contains(err.Error(), "never rewritten") {
		t.Fatalf("same id, other content: %v", err)
	}
	gittest.Git(t, dir, "fsck", "--strict", "--no-dangling")
}

func TestPromoteRefusedWritesNothing(t *testing.T) {
	w := newWorld(t)
	dir := w.git.Dir("config.git")
	g1 := w.first()
	if _, err := w.promote(g1, nil); err != nil {
		t.Fatal(err)
	}
	head := gittest.Git(t, dir, "rev-parse", "main")

	// An unsigned runner: CreateGeneration refuses, naming pin and check.
	unsigned := w.image("platform/runner", "evil", false)
	_, err := release.CreateGeneration(context.Background(), release.NewGeneration{Pool: "agents", From: g1,
		Pins:   map[generation.Kind]generation.Pin{generation.Runner: {Image: unsigned}},
		Verify: release.Verifier{Policy: w.policy}})
	if !errors.Is(err, release.ErrRefused) || !strings.Contains(err.Error(), "runner "+unsigned) || !strings.Contains(err.Error(), "images/signature") {
		t.Fatalf("unsigned pin: %v", err)
	}
	// Built without verification, promote still verifies and refuses.
	bad, err := generation.New("agents", g1, map[generation.Kind]generation.Pin{generation.Runner: {Image: unsigned}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.promote(bad, nil); !errors.Is(err, release.ErrRefused) || !strings.Contains(err.Error(), unsigned) {
		t.Fatalf("promote of an unsigned pin: %v", err)
	}
	// No policy at all: refused unless skipping is explicit.
	if _, err := w.promote(bad, func(p *release.Promotion) { p.Policy = nil }); err == nil || !strings.Contains(err.Error(), "--policy") {
		t.Fatalf("no policy: %v", err)
	}
	if got := gittest.Git(t, dir, "rev-parse", "main"); got != head {
		t.Fatal("a refused promotion moved the branch")
	}
	// A read-only remote: a clear error, nothing half-written.
	g2 := w.gen(g1, map[generation.Kind]string{generation.Runner: w.image("platform/runner", "v2", true)})
	w.git.ReadOnly("config.git", true)
	_, err = w.promote(g2, func(p *release.Promotion) { p.RepoOptions = []gitops.Option{gitops.WithRetry(2, 1)} })
	if !errors.Is(err, gitops.ErrRemote) {
		t.Fatalf("read-only remote: %v", err)
	}
	w.git.ReadOnly("config.git", false)
	gittest.Git(t, dir, "fsck", "--strict", "--no-dangling")
	if got := gittest.Git(t, dir, "rev-parse", "main"); got != head {
		t.Fatal("branch moved")
	}
}

// TestConcurrentPromotions: 10 writers promote generations 2..11 of one
// pool at once over HTTP. Each lands exactly once or fails with a clear
// conflict (a newer sequence got there first); history stays linear and
// the target is the newest that landed.
func TestConcurrentPromotions(t *testing.T) {
	w := newWorld(t)
	dir := w.git.Dir("config.git")
	g1 := w.first()
	if _, err := w.promote(g1, nil); err != nil {
		t.Fatal(err)
	}
	const n = 10
	gens := make([]*generation.Generation, n)
	prev := g1
	for i := range gens {
		gens[i] = w.gen(prev, map[generation.Kind]string{generation.Runner: w.image("platform/runner", fmt.Sprintf("v%d", i+2), true)})
		prev = gens[i]
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range gens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = w.promote(gens[i], func(p *release.Promotion) {
				p.RepoOptions = []gitops.Option{gitops.WithRetry(40, 10e6)}
			})
		}()
	}
	wg.Wait()
	landed := map[string]bool{}
	var newest *generation.Generation
	for i, err := range errs {
		switch {
		case err == nil:
			landed[gens[i].ID] = true
			if newest == nil || gens[i].Sequence > newest.Sequence {
				newest = gens[i]
			}
		case errors.Is(err, release.ErrRollbackNeeded):
		default:
			t.Errorf("writer %d: unexpected error %v", i, err)
		}
	}
	if newest == nil {
		t.Fatal("nothing landed")
	}
	gittest.Git(t, dir, "fsck", "--strict", "--no-dangling")
	if merges := gittest.Git(t, dir, "rev-list", "--merges", "main"); merges != "" {
		t.Fatal("history is not linear")
	}
	trailers := gittest.Git(t, dir, "log", "--format=%(trailers:key=Slipway-Generation,valueonly)", "main")
	for id := range landed {
		if c := strings.Count(trailers, id); c != 1 {
			t.Errorf("%s landed %d times", id, c)
		}
	}
	for _, g := range gens {
		if !landed[g.ID] && strings.Contains(trailers, g.ID) {
			t.Errorf("%s reported a conflict but is in the log", g.ID)
		}
	}
	state, _ := pool.ParseState([]byte(gittest.Git(t, dir, "show", "main:"+pool.StateFile("agents"))), "desired.yaml")
	if state.Target != newest.ID {
		t.Errorf("target %s, want the newest landed %s (sequence %d)", state.Target, newest.ID, newest.Sequence)
	}
	t.Logf("%d of %d landed; newest sequence %d", len(landed), n, newest.Sequence)
}

// recordingForge stands in for a forge (none is reachable here): it records
// the pull request it was asked to open.
type recordingForge struct{ repo, head, base, title string }

func (f *recordingForge) OpenPullRequest(_ context.Context, repo, head, base, title, _ string) (string, error) {
	f.repo, f.head, f.base, f.title = repo, head, base, title
	return "https://forge.example/pr/1", nil
}

func TestPromoteReviewBranch(t *testing.T) {
	w := newWorld(t)
	dir := w.git.Dir("config.git")
	g1 := w.first()
	if _, err := w.promote(g1, nil); err != nil {
		t.Fatal(err)
	}
	main := gittest.Git(t, dir, "rev-parse", "main")
	g2 := w.gen(g1, map[generation.Kind]string{generation.Runner: w.image("platform/runner", "v2", true)})
	f := &recordingForge{}
	res, err := w.promote(g2, func(p *release.Promotion) { p.ReviewBranch = "promote/" + g2.ID[:10]; p.Forge = f })
	if err != nil || res.PullRequest != "https://forge.example/pr/1" {
		t.Fatalf("%+v, %v", res, err)
	}
	if got := gittest.Git(t, dir, "rev-parse", "main"); got != main {
		t.Error("main moved")
	}
	if got := gittest.Git(t, dir, "rev-parse", "promote/"+g2.ID[:10]+"^"); got != main {
		t.Errorf("review branch is not on main: parent %s", got)
	}
	if f.head != "promote/"+g2.ID[:10] || f.base != "main" || !strings.Contains(f.title, g2.ID) {
		t.Errorf("forge asked %+v", f)
	}
}

// kindLabels are the config labels that make a test image what its
// repository says it is (generation create refuses a runner pin without the
// runner's, a template pin without the template's).
func withKindLabels(img v1.Image, repo string) (v1.Image, error) {
	labels := map[string]string{}
	switch {
	case strings.Contains(repo, "runner"):
		labels[sandbox.LabelRunnerSHA256] = strings.Repeat("0", 64)
	case strings.HasPrefix(repo, "templates/"):
		labels[templatemeta.LabelSpecDigest] = "sha256:" + strings.Repeat("0", 64)
	default:
		return img, nil
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Config.Labels = labels
	return mutate.ConfigFile(img, cf)
}
