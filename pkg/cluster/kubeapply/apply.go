package kubeapply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/cluster/render"
)

// FieldManager is the server-side apply field manager of everything
// Slipway applies.
const FieldManager = "slipway"

// Errors, in families: ErrConflict (another field manager owns a field
// Slipway applies), ErrNotReady (a warm pool was not ready in time) and
// ErrApply (the cluster refused or could not take an object).
var (
	ErrConflict = errors.New("field manager conflict")
	ErrNotReady = errors.New("warm pools not ready")
	ErrApply    = errors.New("cannot apply")
)

// Action is what happened to one object.
type Action string

// Actions, as fluxcd's ssa.ChangeSet names them, and Kept for an object
// that would have been pruned but is not Slipway's alone.
const (
	Created   Action = "Created"
	Updated   Action = "Updated"
	Unchanged Action = "Unchanged"
	Pruned    Action = "Pruned"
	Kept      Action = "Kept"
)

// Change is the result for one object.
type Change struct {
	Ref    Ref    `json:"object"`
	Action Action `json:"action"`
	// Reason says why a Kept object was not pruned.
	Reason string `json:"reason,omitempty"`
}

// String is "SandboxTemplate/sandboxes/agents-18dccbf123b1 Created".
func (c Change) String() string {
	s := c.Ref.String() + " " + string(c.Action)
	if c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	return s
}

// ChangeSet is the result of one Apply.
type ChangeSet struct {
	Pool string `json:"pool"`
	// Revision is the config revision applied.
	Revision string `json:"revision"`
	// Inventory is the namespace/name of the inventory ConfigMap.
	Inventory string `json:"inventory"`
	// Changes lists the applied objects in the render's order, then the
	// pruned and kept ones.
	Changes []Change `json:"changes"`
	// WarmPools are the applied SandboxWarmPools, for Wait.
	WarmPools []Ref `json:"warmPools"`
}

// Option configures New.
type Option func(*options) error

type options struct {
	force     bool
	namespace string
}

// WithForceConflicts takes over fields another field manager owns instead
// of failing with a *ConflictError.
func WithForceConflicts() Option {
	return func(o *options) error { o.force = true; return nil }
}

// WithNamespace is the namespace of namespaced objects the render leaves
// without one (a kubeconfig context's namespace; default "default").
func WithNamespace(ns string) Option {
	return func(o *options) error {
		if ns == "" {
			return errors.New("kubeapply: empty namespace")
		}
		o.namespace = ns
		return nil
	}
}

// Applier applies rendered pools to one cluster.
type Applier struct {
	dyn    dynamic.Interface
	mapper meta.ResettableRESTMapper
	opts   options
}

// New returns an Applier for the cluster cfg points at.
func New(cfg *rest.Config, opts ...Option) (*Applier, error) {
	o := options{namespace: "default"}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.RateLimiter == nil { // client-go's default of 5 a second throttles a pool of many generations
		cfg.QPS, cfg.Burst = 50, 100
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeapply: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeapply: %w", err)
	}
	return &Applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), opts: o}, nil
}

// object is one decoded object of the render, mapped to its resource.
type object struct {
	u   *unstructured.Unstructured
	ref Ref
	res dynamic.ResourceInterface
}

// Apply applies the rendered pool res, prunes what the previous apply of
// this pool left and this render no longer has, and records the
// inventory. An empty render is an error: it would prune everything.
func (a *Applier) Apply(ctx context.Context, res *render.Result) (*ChangeSet, error) {
	objs, err := a.decode(res)
	if err != nil {
		return nil, err
	}
	cs := &ChangeSet{Pool: res.Pool, Revision: res.Revision, Changes: []Change{}, WarmPools: []Ref{}}
	inv := a.inventoryFor(res.Pool, objs)
	cs.Inventory = inv.ns + "/" + inv.name
	old, err := inv.read(ctx)
	if err != nil {
		return nil, err
	}
	desired := make([]Ref, 0, len(objs))
	for _, o := range objs {
		action, err := a.applyOne(ctx, o)
		if err != nil {
			// What this apply created stays tracked, so a later render
			// without it can prune it.
			if werr := inv.write(ctx, union(old, desired)); werr != nil {
				return cs, errors.Join(err, werr)
			}
			return cs, err
		}
		cs.Changes = append(cs.Changes, Change{Ref: o.ref, Action: action})
		desired = append(desired, o.ref)
		if o.ref.Kind == kubeobjects.KindSandboxWarmPool {
			cs.WarmPools = append(cs.WarmPools, o.ref)
		}
	}
	// Before pruning, the inventory holds both the old and the new objects:
	// a crash from here on leaves nothing untracked.
	if err := inv.write(ctx, union(old, desired)); err != nil {
		return cs, err
	}
	kept, changes, err := a.prune(ctx, res.Pool, old, desired)
	cs.Changes = append(cs.Changes, changes...)
	if err != nil {
		return cs, err
	}
	if err := inv.write(ctx, union(desired, kept)); err != nil {
		return cs, err
	}
	return cs, nil
}

// decode splits the render into objects and maps each to its resource,
// in the render's order.
func (a *Applier) decode(res *render.Result) ([]object, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(res.YAML), 4096)
	var objs []object
	seen := map[Ref]bool{}
	for i := 1; ; i++ {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("kubeapply: pool %s: render document %d: %w", res.Pool, i, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		o, err := a.mapObject(u)
		if err != nil {
			return nil, fmt.Errorf("kubeapply: pool %s: render document %d: %w", res.Pool, i, err)
		}
		if seen[o.ref] {
			return nil, fmt.Errorf("kubeapply: pool %s: %s rendered twice", res.Pool, o.ref)
		}
		seen[o.ref] = true
		objs = append(objs, o)
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("kubeapply: pool %s: %w: the render holds no objects (an apply would prune everything)", res.Pool, ErrApply)
	}
	return objs, nil
}

// mapObject finds u's resource, and gives a namespaced object without a
// namespace the default one.
func (a *Applier) mapObject(u *unstructured.Unstructured) (object, error) {
	gvk := u.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" || u.GetName() == "" {
		return object{}, fmt.Errorf("%w: an object without apiVersion, kind or name", ErrApply)
	}
	m, err := a.mapping(gvk)
	if err != nil {
		return object{}, err
	}
	ri := a.dyn.Resource(m.Resource)
	var res dynamic.ResourceInterface = ri
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(a.opts.namespace)
		}
		res = ri.Namespace(u.GetNamespace())
	} else {
		u.SetNamespace("")
	}
	return object{u: u, ref: refOf(u), res: res}, nil
}

// mapping maps gvk to its resource, asking discovery again once when the
// kind is unknown (its CRD may be new).
func (a *Applier) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset()
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("%w: the cluster serves no %s (is agent-sandbox v0.5.6 installed?): %w", ErrApply, gvk, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: map %s: %w", ErrApply, gvk, err)
	}
	return m, nil
}

// applyOne server-side applies o and says what changed: the resource
// version stays the same when the apply changed nothing.
func (a *Applier) applyOne(ctx context.Context, o object) (Action, error) {
	before := ""
	cur, err := o.res.Get(ctx, o.ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return "", fmt.Errorf("kubeapply: get %s: %w: %w", o.ref, ErrApply, err)
	default:
		before = cur.GetResourceVersion()
	}
	got, err := o.res.Apply(ctx, o.ref.Name, o.u, metav1.ApplyOptions{FieldManager: FieldManager, Force: a.opts.force})
	if err != nil {
		if apierrors.IsConflict(err) {
			return "", conflictError(o.ref, err)
		}
		return "", fmt.Errorf("kubeapply: apply %s: %w: %w", o.ref, ErrApply, err)
	}
	switch {
	case before == "":
		return Created, nil
	case got.GetResourceVersion() == before:
		return Unchanged, nil
	default:
		return Updated, nil
	}
}

// ConflictError is an apply refused because other field managers own
// fields Slipway sets. It matches ErrConflict.
type ConflictError struct {
	Object Ref
	// Conflicts are the API server's words per field, each naming the
	// other manager ("conflict with \"ops\": .spec.replicas").
	Conflicts []string
	err       error
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("kubeapply: apply %s: %s (field manager %q; apply with --force-conflicts to take the fields over): %s",
		e.Object, ErrConflict, FieldManager, strings.Join(e.Conflicts, "; "))
}

// Is matches ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Unwrap returns the API server's error.
func (e *ConflictError) Unwrap() error { return e.err }

func conflictError(ref Ref, err error) *ConflictError {
	ce := &ConflictError{Object: ref, err: err}
	var se apierrors.APIStatus
	if errors.As(err, &se) && se.Status().Details != nil {
		for _, c := range se.Status().Details.Causes {
			if c.Field != "" {
				ce.Conflicts = append(ce.Conflicts, c.Message+": "+c.Field)
			} else {
				ce.Conflicts = append(ce.Conflicts, c.Message)
			}
		}
	}
	if len(ce.Conflicts) == 0 {
		ce.Conflicts = []string{err.Error()}
	}
	return ce
}
