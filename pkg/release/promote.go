package release

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

// Promotion is one `slipway promote`.
type Promotion struct {
	// Repo is the config repository (URL or path) and Branch its tracked
	// branch (default "main").
	Repo   string
	Branch string
	// ReviewBranch, if set, receives the commit instead of Branch.
	ReviewBranch string
	// Generation is the document to promote.
	Generation *generation.Generation
	// Rollback allows a sequence at or below the pool's highest.
	Rollback bool
	// Activate makes the generation active at once: only on a pool with no
	// active generation (bootstrap).
	Activate bool
	// Policy verifies the image pins when the repository holds no
	// policies/verification.yaml; the repository's policy wins when it
	// has one. SkipVerify is --insecure-skip-verify.
	Policy     *policy.Policy
	SkipVerify bool
	// VerifyOptions pass registry options to the policy.
	VerifyOptions []policy.Option
	Author        gitops.Signature
	// RepoOptions configure the git side (auth, cache, retries).
	RepoOptions []gitops.Option
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Forge, with ReviewBranch, opens a pull request for the review branch
	// once it is pushed (nil: none is opened). None is built in: the
	// caller supplies one.
	Forge Forge
}

// Forge opens pull requests on a git hosting service.
type Forge interface {
	// OpenPullRequest asks to merge head into base in repo and returns the
	// request's address.
	OpenPullRequest(ctx context.Context, repo, head, base, title, body string) (string, error)
}

// PromoteResult reports a promotion.
type PromoteResult struct {
	*gitops.Result
	Pool       string `json:"pool"`
	Generation string `json:"generation"`
	Sequence   int64  `json:"sequence"`
	Previous   string `json:"previous,omitempty"`
	Rollback   bool   `json:"rollback,omitempty"`
	Activated  bool   `json:"activated,omitempty"`
	PolicyFrom string `json:"policyFrom,omitempty"`
	// PullRequest is the review request opened by the Forge, if any.
	PullRequest string `json:"pullRequest,omitempty"`
}

// ErrRollbackNeeded marks a promotion of a sequence at or below the
// pool's highest without Rollback.
var ErrRollbackNeeded = fmt.Errorf("%w: rollback needed", gitops.ErrConflict)

// Promote adds the generation document to pools/<pool>/generations/ and
// makes it the pool's target in one commit, creating the pool's folder on
// its first promotion. The document is immutable: a different document
// under an existing id is refused. A sequence at or below the pool's
// highest needs Rollback, so that automation never silently undoes a
// rollback; another writer promoting a newer sequence meanwhile is a
// conflict, not something to retry. Image pins are verified against the
// repository's policy (or the given one) before the commit.
func Promote(ctx context.Context, p Promotion) (*PromoteResult, error) {
	g := p.Generation
	if g == nil {
		return nil, errors.New("release: promote: no generation")
	}
	if p.Branch == "" {
		p.Branch = "main"
	}
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	doc, err := generation.Marshal(g)
	if err != nil {
		return nil, err
	}
	repo, err := gitops.Open(ctx, p.Repo, p.RepoOptions...)
	if err != nil {
		return nil, err
	}
	out := &PromoteResult{Pool: g.Pool, Generation: g.ID, Sequence: g.Sequence}
	verified := &verifyOnce{}
	res, err := repo.Update(ctx, gitops.Request{
		Branch:     p.Branch,
		PushBranch: p.ReviewBranch,
		Author:     p.Author,
		Edit: func(t *gitops.Tree) (*gitops.Commit, error) {
			return promoteEdit(ctx, t, p, g, doc, now().UTC().Truncate(time.Second), verified, out)
		},
	})
	if err != nil {
		return nil, err
	}
	out.Result = res
	if p.Forge != nil && p.ReviewBranch != "" && res.Status == gitops.Committed {
		title, body, _ := strings.Cut(res.Message, "\n")
		if out.PullRequest, err = p.Forge.OpenPullRequest(ctx, repo.URL(), p.ReviewBranch, p.Branch, title, strings.TrimSpace(body)); err != nil {
			return out, fmt.Errorf("release: %s pushed to %s, but the pull request was not opened: %w", g.ID, p.ReviewBranch, err)
		}
	}
	return out, nil
}

// verifyOnce caches the verification of one generation against one policy
// revision across the attempts of an update.
type verifyOnce struct {
	mu     sync.Mutex
	digest string
	err    error
}

func (v *verifyOnce) do(ctx context.Context, pol *policy.Policy, g *generation.Generation, opts []policy.Option) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.digest == pol.Digest {
		return v.err
	}
	_, err := Verifier{Policy: pol, Options: opts}.VerifyPins(ctx, g)
	v.digest, v.err = pol.Digest, err
	return err
}

func promoteEdit(ctx context.Context, t *gitops.Tree, p Promotion, g *generation.Generation, doc []byte, now time.Time, verified *verifyOnce, out *PromoteResult) (*gitops.Commit, error) {
	name := g.Pool
	// The pool's settings (created with defaults on the first promotion).
	var pl *pool.Pool
	if b, err := t.ReadFile(pool.PoolFile(name)); err == nil {
		if pl, err = pool.ParsePool(b, pool.PoolFile(name)); err != nil {
			return nil, err
		}
	} else if errors.Is(err, gitops.ErrNotExist) {
		pl = pool.Default(name)
		b, err := pool.Marshal(pl)
		if err != nil {
			return nil, err
		}
		if err := t.WriteFile(pool.PoolFile(name), b); err != nil {
			return nil, err
		}
	} else {
		return nil, err
	}
	if err := g.Validate(pl.Spec.RequiredKinds); err != nil {
		return nil, fmt.Errorf("pool %s requires %v: %w", name, pl.Spec.RequiredKinds, err)
	}

	// Trust lives in the config repository.
	pol := p.Policy
	out.PolicyFrom = "flag"
	if repoPol, err := policy.ReadFrom(t.ReadFile, pool.PolicyPath, pool.PolicyPath+" in "+p.Repo); err == nil {
		pol, out.PolicyFrom = repoPol, pool.PolicyPath
	} else if !errors.Is(err, gitops.ErrNotExist) {
		return nil, err
	}
	switch {
	case pol != nil:
		if err := verified.do(ctx, pol, g, p.VerifyOptions); err != nil {
			return nil, err
		}
	case p.SkipVerify:
		out.PolicyFrom = "skipped (--insecure-skip-verify)"
	default:
		return nil, fmt.Errorf("release: %s holds no %s: give --policy FILE (or --insecure-skip-verify)", p.Repo, pool.PolicyPath)
	}

	state, err := pool.ReadState(name, t.ReadFile)
	if err != nil {
		return nil, err
	}

	// The document is immutable under its id.
	file := pool.GenerationFile(name, g.ID)
	if old, err := t.ReadFile(file); err == nil && !bytes.Equal(old, doc) {
		// The id covers the pins; only unhashed parts (sequence, the
		// verification record) can differ, and they may not either.
		return nil, fmt.Errorf("%w: %s exists with other content; a generation file is never rewritten", gitops.ErrConflict, file)
	} else if err != nil && !errors.Is(err, gitops.ErrNotExist) {
		return nil, err
	}

	// Already the target: nothing to do (repeat-safe).
	if state.Target == g.ID && (!p.Activate || isActive(state, g.ID)) {
		return nil, nil
	}
	highest, highestID, previous, err := highestSequence(t, name, state.Target)
	if err != nil {
		return nil, err
	}
	out.Previous = state.Target
	// Anything at or below the highest sequence ever promoted, the highest
	// itself included once the target moved away from it, goes back in
	// time: only on purpose. So a re-run of an old pipeline never undoes a
	// rollback; new content gets a new sequence.
	if g.Sequence <= highest {
		if !p.Rollback {
			return nil, fmt.Errorf("%w: pool %s already has sequence %d (%s); %s is sequence %d: promoting it is a rollback and needs --rollback",
				ErrRollbackNeeded, name, highest, highestID, g.ID, g.Sequence)
		}
		out.Rollback = true
	}
	if err := t.WriteFile(file, doc); err != nil {
		return nil, err
	}
	state.Target = g.ID
	state.History = append(state.History, pool.HistoryEntry{Target: g.ID, Sequence: g.Sequence, At: now, Rollback: out.Rollback})
	if p.Activate {
		if a, ok := state.Active(); ok && a.ID != g.ID {
			return nil, fmt.Errorf("%w: pool %s has an active generation (%s): change it with a rollout, not --activate", gitops.ErrConflict, name, a.ID)
		}
		if !isActive(state, g.ID) {
			state.Generations = append(state.Generations, pool.GenState{ID: g.ID, Sequence: g.Sequence, State: pool.Active, WarmSize: pl.Spec.WarmSize, Since: now})
		}
		out.Activated = true
	}
	sb, err := pool.Marshal(state)
	if err != nil {
		return nil, err
	}
	if err := t.WriteFile(pool.StateFile(name), sb); err != nil {
		return nil, err
	}
	if err := setKustomizeImages(t, name, g); err != nil {
		return nil, err
	}

	step := "promote"
	if out.Rollback {
		step = "rollback"
	}
	subject := fmt.Sprintf("%s: promote %s (sequence %d)", name, g.ID, g.Sequence)
	if out.Rollback {
		subject = fmt.Sprintf("%s: roll back to %s (sequence %d)", name, g.ID, g.Sequence)
	}
	return &gitops.Commit{
		Subject: subject,
		Body:    changedPins(previous, g),
		Trailers: []gitops.Trailer{
			{Key: "Slipway-Pool", Value: name},
			{Key: "Slipway-Generation", Value: g.ID},
			{Key: "Slipway-Step", Value: step},
		},
	}, nil
}

func isActive(s *pool.State, id string) bool {
	a, ok := s.Active()
	return ok && a.ID == id
}

// highestSequence reads the pool's generation documents and returns the
// highest sequence and its id, and the generation named target (nil if
// none).
func highestSequence(t *gitops.Tree, name, target string) (int64, string, *generation.Generation, error) {
	entries, err := t.List(pool.GenerationsDir(name))
	if err != nil {
		return 0, "", nil, err
	}
	var highest int64
	var highestID string
	var prev *generation.Generation
	for _, e := range entries {
		if !strings.HasSuffix(e, ".yaml") {
			continue
		}
		file := pool.GenerationsDir(name) + "/" + e
		b, err := t.ReadFile(file)
		if err != nil {
			return 0, "", nil, err
		}
		g, err := generation.ParseNamed(b, file)
		if err != nil {
			return 0, "", nil, err
		}
		if g.Sequence > highest {
			highest, highestID = g.Sequence, g.ID
		}
		if g.ID == target {
			prev = g
		}
	}
	return highest, highestID, prev, nil
}

// changedPins lists every pin that changed from prev to g, for the commit
// message.
func changedPins(prev, g *generation.Generation) string {
	if prev == nil {
		var lines []string
		for _, k := range generation.Kinds() {
			if pin, ok := g.Pins[k]; ok {
				lines = append(lines, fmt.Sprintf("%s: %s", k, pin))
			}
		}
		return "First generation of the pool:\n" + strings.Join(lines, "\n")
	}
	d := generation.Diff(prev, g)
	var lines []string
	for _, c := range d.Pins {
		lines = append(lines, c.String())
	}
	if d.Compatibility != nil {
		lines = append(lines, d.Compatibility.String())
	}
	if len(lines) == 0 {
		return "No pin changed from " + prev.ID + "."
	}
	return "Changed from " + prev.ID + ":\n" + strings.Join(lines, "\n")
}

// kustomizeName is the image name a pool's manifests use for an artifact
// kind; the pool's kustomization.yaml pins it.
func kustomizeName(k generation.Kind) string { return "slipway/" + k.ArtifactKind() }

// setKustomizeImages pins the pool's kustomization.yaml images to the
// generation's image pins (newName and digest), keeping the rest of the
// file and its comments.
func setKustomizeImages(t *gitops.Tree, name string, g *generation.Generation) error {
	file := pool.KustomizationFile(name)
	b, err := t.ReadFile(file)
	if errors.Is(err, gitops.ErrNotExist) {
		b = []byte("# Images of pool " + name + ", pinned by digest by slipway promote.\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
	} else if err != nil {
		return err
	}
	root, err := yaml.Parse(string(b))
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	images, err := root.Pipe(yaml.LookupCreate(yaml.SequenceNode, "images"))
	if err != nil {
		return fmt.Errorf("%s: images: %w", file, err)
	}
	for _, k := range generation.Kinds() {
		pin, ok := g.Pins[k]
		if !ok || pin.Form() != generation.FormImage {
			continue
		}
		repo, digest, _ := strings.Cut(pin.Image, "@")
		if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
			repo = repo[:i] // the tag; the digest is the identity
		}
		entry, err := images.Pipe(yaml.MatchElement("name", kustomizeName(k)))
		if err != nil {
			return fmt.Errorf("%s: images: %w", file, err)
		}
		if entry == nil {
			entry = yaml.NewMapRNode(&map[string]string{"name": kustomizeName(k)})
			if err := images.PipeE(yaml.Append(entry.YNode())); err != nil {
				return fmt.Errorf("%s: images: %w", file, err)
			}
		}
		for field, value := range map[string]string{"newName": repo, "digest": digest} {
			if err := entry.PipeE(yaml.SetField(field, yaml.NewStringRNode(value))); err != nil {
				return fmt.Errorf("%s: images[%s]: %w", file, kustomizeName(k), err)
			}
		}
		_ = entry.PipeE(yaml.Clear("newTag"))
	}
	s, err := root.String()
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return t.WriteFile(file, []byte(s))
}

// PolicyFiles returns what seeding the config repository with the policy
// file at file stores: policies/verification.yaml and each key file it
// names (at the same path relative to policies/). Key files must be
// relative and stay below the policy's folder.
func PolicyFiles(file string) (map[string][]byte, error) {
	p, err := policy.Load(file)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{pool.PolicyPath: b}
	dir := path.Dir(pool.PolicyPath)
	for _, k := range p.Spec.Keys {
		if k.PublicKeyFile == "" {
			continue
		}
		rel := path.Clean(filepath.ToSlash(k.PublicKeyFile))
		if path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("%s: key %s: publicKeyFile %s must be relative and below the policy's folder to travel with it", file, k.Name, k.PublicKeyFile)
		}
		kb, err := os.ReadFile(filepath.Join(filepath.Dir(file), filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		out[path.Join(dir, rel)] = kb
	}
	return out, nil
}

// InitConfig seeds the config repository at repoURL for a pool: pool.yaml
// with defaults, an empty desired state, a kustomization, and files (the
// verification policy and its keys, from PolicyFiles). Existing files are
// kept (repeat-safe); an init that adds nothing makes no commit.
func InitConfig(ctx context.Context, repoURL, branch, name string, files map[string][]byte, author gitops.Signature, opts ...gitops.Option) (*gitops.Result, error) {
	if !pool.ValidName(name) {
		return nil, fmt.Errorf("release: %q is not a pool name (lower-case letters, digits, '-')", name)
	}
	if branch == "" {
		branch = "main"
	}
	if doc, ok := files[pool.PolicyPath]; ok {
		if _, err := policy.ParseFrom(doc, pool.PolicyPath, func(f string) ([]byte, error) {
			b, ok := files[path.Join(path.Dir(pool.PolicyPath), f)]
			if !ok {
				return nil, fmt.Errorf("key file %s not given", f)
			}
			return b, nil
		}); err != nil {
			return nil, err
		}
	}
	repo, err := gitops.Open(ctx, repoURL, opts...)
	if err != nil {
		return nil, err
	}
	return repo.Update(ctx, gitops.Request{Branch: branch, Author: author, Edit: func(t *gitops.Tree) (*gitops.Commit, error) {
		var added []string
		put := func(file string, b []byte) error {
			if t.Exists(file) {
				return nil
			}
			added = append(added, file)
			return t.WriteFile(file, b)
		}
		pb, err := pool.Marshal(pool.Default(name))
		if err != nil {
			return nil, err
		}
		sb, err := pool.Marshal(pool.NewState(name))
		if err != nil {
			return nil, err
		}
		seed := map[string][]byte{
			pool.PoolFile(name):          pb,
			pool.StateFile(name):         sb,
			pool.KustomizationFile(name): []byte("# Images of pool " + name + ", pinned by digest by slipway promote.\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nimages: []\n"),
		}
		for f, b := range files {
			seed[f] = b
		}
		names := make([]string, 0, len(seed))
		for f := range seed {
			names = append(names, f)
		}
		sort.Strings(names)
		for _, f := range names {
			if err := put(f, seed[f]); err != nil {
				return nil, err
			}
		}
		if len(added) == 0 {
			return nil, nil
		}
		return &gitops.Commit{
			Subject:  name + ": seed the pool",
			Body:     "Added:\n" + strings.Join(added, "\n"),
			Trailers: []gitops.Trailer{{Key: "Slipway-Pool", Value: name}, {Key: "Slipway-Step", Value: "init"}},
		}, nil
	}})
}
