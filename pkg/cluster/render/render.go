package render

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

// Errors, in two families: ErrRender (the tree cannot be rendered as it
// is: a bad kustomization, a pin that cannot become a field) and
// ErrNotVerified (a generation did not verify: nothing is rendered).
var (
	ErrRender      = errors.New("cannot render")
	ErrNotVerified = errors.New("not verified")
)

// Tree is a config repository's file tree at one revision (a
// *gitops.Tree): ReadFile fails with an error matching fs.ErrNotExist for
// a path that is not a file, and List names the files and folders in a
// folder.
type Tree interface {
	ReadFile(path string) ([]byte, error)
	List(dir string) ([]string, error)
}

// Option configures Pool.
type Option func(*options) error

type options struct {
	policy     *policy.Policy
	operator   *policy.Policy
	skip       bool
	cache      *policy.Cache
	policyOpts []policy.Option
	// json prints the objects as JSON lines instead of YAML.
	json bool
	// inputHook, a test hook, sees kustomize's input before the build.
	inputHook func(fsys filesys.FileSystem, dir string)
}

// WithPolicy verifies against p when the tree holds no
// policies/verification.yaml (the tree's own policy always wins).
func WithPolicy(p *policy.Policy) Option {
	return func(o *options) error { o.policy = p; return nil }
}

// WithOperatorPolicy verifies against p whatever the tree holds: the
// policy of an operator who does not trust the tree to name the policy
// that verifies it (Argo CD's plugin given a pool's folder alone, which a
// pool's writer controls). It wins over WithPolicy and the tree's
// policies/verification.yaml, which is not read.
func WithOperatorPolicy(p *policy.Policy) Option {
	return func(o *options) error {
		if p == nil {
			return errors.New("render: WithOperatorPolicy: no policy")
		}
		o.operator = p
		return nil
	}
}

// WithInsecureSkipVerify renders a tree that holds no verification policy
// without verifying anything. A policy in the tree is still applied.
func WithInsecureSkipVerify() Option {
	return func(o *options) error { o.skip = true; return nil }
}

// WithVerifyCache remembers verification results in c (keyed by image
// digest and policy digest, see policy.Cache), so that a render of an
// unchanged pin under an unchanged policy asks no registry.
func WithVerifyCache(c *policy.Cache) Option {
	return func(o *options) error { o.cache = c; return nil }
}

// WithJSONLines prints the objects as one compact JSON object per line,
// in Result.JSON, instead of YAML: the form Argo CD's repo-server reads
// without converting each document (its decoder takes a stream that
// starts with "{" as JSON), and cheaper to write. Values are the ones the
// YAML holds, as YAML 1.2 reads them (kustomize's reading).
func WithJSONLines() Option {
	return func(o *options) error { o.json = true; return nil }
}

// WithPolicyOptions passes registry options to verification.
func WithPolicyOptions(opts ...policy.Option) Option {
	return func(o *options) error { o.policyOpts = append(o.policyOpts, opts...); return nil }
}

// Result is a rendered pool.
type Result struct {
	Pool     string `json:"pool"`
	Revision string `json:"revision"`
	// Policy is the digest of the policy every generation verified
	// against ("" when verification was skipped).
	Policy string `json:"policy,omitempty"`
	// Generations lists the generations rendered, in desired.yaml's order.
	Generations []Generation `json:"generations"`
	// YAML is the multi-document YAML of every object, sorted by kind
	// (Namespace, then the pool's own objects by kind, then
	// SandboxTemplate, then SandboxWarmPool), then namespace and name.
	YAML []byte `json:"-"`
	// JSON is the same objects in the same order as JSON lines, instead
	// of YAML, when WithJSONLines asked for it.
	JSON []byte `json:"-"`
}

// Generation is one rendered generation.
type Generation struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Template string `json:"template"`
	// WarmPool is the SandboxWarmPool's name ("" for draining and
	// retained generations, which have none).
	WarmPool string `json:"warmPool,omitempty"`
	Replicas int    `json:"replicas,omitempty"`
}

// Refusal is one generation that did not verify or could not be read.
type Refusal struct {
	Generation string
	Reason     string
}

// NotVerifiedError lists the generations that kept a pool from rendering.
// It matches ErrNotVerified (and policy.ErrRefused when a policy refused a
// pin).
type NotVerifiedError struct {
	Pool     string
	Refusals []Refusal
	refused  bool
}

func (e *NotVerifiedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "render: pool %s: %d generation(s) %s, nothing rendered:", e.Pool, len(e.Refusals), ErrNotVerified)
	for _, r := range e.Refusals {
		fmt.Fprintf(&b, "\n  %s: %s", r.Generation, strings.ReplaceAll(r.Reason, "\n", "\n    "))
	}
	return b.String()
}

// Is matches ErrNotVerified, and policy.ErrRefused when a pin was refused.
func (e *NotVerifiedError) Is(target error) bool {
	return target == ErrNotVerified || (e.refused && target == policy.ErrRefused)
}

// Pool renders pool poolName of tree t, the config repository at
// revision: the objects of every generation desired.yaml lists, added to
// the pool's kustomization.yaml and built with kustomize. Every generation
// is verified first; if one does not verify, nothing is rendered and the
// error (a *NotVerifiedError) says which, and why.
func Pool(ctx context.Context, t Tree, poolName, revision string, opts ...Option) (*Result, error) {
	o := &options{}
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	if !pool.ValidName(poolName) {
		return nil, fmt.Errorf("render: %q is not a pool name", poolName)
	}
	if revision == "" {
		return nil, fmt.Errorf("render: pool %s: no config revision", poolName)
	}
	pl, err := pool.ReadPool(poolName, t.ReadFile)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	state, err := pool.ReadState(poolName, t.ReadFile)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	pol, err := treePolicy(t, o)
	if err != nil {
		return nil, err
	}
	v := startVerify(ctx, t, pl, state, pol, o)
	if v.unread {
		// A generation that cannot be read leaves nothing to render.
		return nil, v.wait()
	}
	// The objects are built while the signatures are checked; they leave
	// here only once every generation passed.
	gens := v.read
	res, err := renderPool(t, pl, state, gens, pol, revision, o)
	if verr := v.wait(); verr != nil {
		return nil, verr
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// renderPool builds the pool's objects from its state and the generations
// read (by ID).
func renderPool(t Tree, pl *pool.Pool, state *pool.State, gens map[string]*generation.Generation, pol *policy.Policy, revision string, o *options) (*Result, error) {
	poolName := pl.Metadata.Name
	res := &Result{Pool: poolName, Revision: revision, Generations: []Generation{}}
	if pol != nil {
		res.Policy = pol.Digest
	}
	var objects []map[string]any
	for _, e := range state.Generations {
		tmpl, err := sandboxTemplate(pl, gens[e.ID], revision)
		if err != nil {
			return nil, fmt.Errorf("render: %w", err)
		}
		objects = append(objects, tmpl)
		rg := Generation{ID: e.ID, State: e.State, Template: kubeobjects.ObjectName(poolName, e.ID)}
		if e.State == pool.Warming || e.State == pool.Active {
			objects = append(objects, sandboxWarmPool(poolName, e.ID, revision, e.WarmSize))
			rg.WarmPool, rg.Replicas = rg.Template, e.WarmSize
		}
		res.Generations = append(res.Generations, rg)
	}
	out, err := build(t, pl, revision, objects, gens, o.json, o.inputHook)
	if err != nil {
		return nil, err
	}
	if o.json {
		res.JSON = out
	} else {
		res.YAML = out
	}
	return res, nil
}

// treePolicy is the policy at this revision, as the runtime finds it: the
// operator's when given (the tree's is not read), else the tree's
// policies/verification.yaml, else the given one, else none when
// verification is skipped by name.
func treePolicy(t Tree, o *options) (*policy.Policy, error) {
	if o.operator != nil {
		return o.operator, nil
	}
	p, err := policy.ReadFrom(t.ReadFile, pool.PolicyPath, pool.PolicyPath)
	switch {
	case err == nil:
		return p, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("render: %w", err)
	case o.policy != nil:
		return o.policy, nil
	case o.skip:
		return nil, nil
	default:
		return nil, fmt.Errorf("render: the config repository holds no %s: give a policy (or skip verification explicitly)", pool.PolicyPath)
	}
}

// verifying is the verification of a pool's generations under way: read
// holds every generation read and checked (by ID), unread says whether one
// could not be, and wait returns once all are verified, nil or every
// refusal together in the state's order.
type verifying struct {
	read   map[string]*generation.Generation
	unread bool
	wait   func() error
}

// startVerify reads and checks every generation the state lists, in
// order, and starts verifying them side by side (each verification is
// registry round trips, or a look-up in the cache).
func startVerify(ctx context.Context, t Tree, pl *pool.Pool, state *pool.State, pol *policy.Policy, o *options) *verifying {
	name := pl.Metadata.Name
	popts := o.policyOpts
	if o.cache != nil {
		popts = append(append([]policy.Option(nil), popts...), policy.WithCache(o.cache))
	}
	type item struct {
		g        *generation.Generation
		err      error
		refusals bool
	}
	items := make([]item, len(state.Generations))
	v := &verifying{read: map[string]*generation.Generation{}}
	for i, e := range state.Generations {
		file := pool.GenerationFile(name, e.ID)
		b, err := t.ReadFile(file)
		if err != nil {
			items[i].err = fmt.Errorf("%s: %v", file, err)
			v.unread = true
			continue
		}
		g, err := generation.ParseNamed(b, file)
		if err == nil && g.ID != e.ID {
			err = fmt.Errorf("%s holds %s", file, g.ID)
		}
		if err == nil {
			err = g.Validate(pl.Spec.RequiredKinds)
		}
		items[i].g, items[i].err = g, err
		if err != nil {
			v.unread = true
		} else {
			v.read[e.ID] = g
		}
	}
	eg, ectx := errgroup.WithContext(ctx)
	if pol != nil {
		eg.SetLimit(verifyConcurrency)
		for i := range items {
			if items[i].err != nil {
				continue
			}
			eg.Go(func() error {
				// The record's time is not rendered: a zero time keeps it out.
				_, err := pol.VerifyGeneration(ectx, items[i].g, time.Time{}, popts...)
				if err != nil && !errors.Is(err, policy.ErrRefused) {
					return fmt.Errorf("render: pool %s: verify %s: %w", name, items[i].g.ID, err)
				}
				items[i].err, items[i].refusals = err, err != nil
				return nil
			})
		}
	}
	v.wait = func() error {
		if err := eg.Wait(); err != nil {
			return err
		}
		nv := &NotVerifiedError{Pool: name}
		for i, e := range state.Generations {
			if items[i].err != nil {
				nv.Refusals = append(nv.Refusals, Refusal{e.ID, items[i].err.Error()})
				nv.refused = nv.refused || items[i].refusals
			}
		}
		if len(nv.Refusals) > 0 {
			return nv
		}
		return nil
	}
	return v
}

// verifyConcurrency bounds the generations verified at once.
const verifyConcurrency = 8
