package kubefleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
)

// LabelProof marks a rollout's proof claim (value "true"): it never counts
// as traffic.
const LabelProof = "slipway.dev/proof"

// The resources the fleet reads and deletes.
var (
	SandboxTemplates = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	SandboxWarmPools = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	SandboxClaims    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	Sandboxes        = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	pods             = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// Errors, for errors.Is.
var (
	// ErrCluster: the cluster did not answer, or does not serve
	// agent-sandbox's API.
	ErrCluster = errors.New("kubefleet: cluster")
	// ErrNotSynced: the pool's objects do not (yet) all carry one config
	// revision, or there are none.
	ErrNotSynced = errors.New("kubefleet: not synced")
	// ErrNoProver: the fleet has no Prover to run proof checks with.
	ErrNoProver = errors.New("kubefleet: no prover")
)

// Applier brings the cluster to the desired state at the head of the
// config repository's branch and says which revision it applied (or, for
// Argo CD, which revision the Application reports synced). RenderApplier
// is one; an Argo CD Application is another.
type Applier interface {
	Sync(ctx context.Context) (revision string, err error)
}

// Prover runs a rollout's proof checks on a proof claim of the pool's
// warming generation (the runtime on the Kubernetes sandbox backend does,
// through the runner in the pod).
type Prover interface {
	Prove(ctx context.Context, pool string, req runtimeapi.ProofRequest) (*runtimeapi.ProofResult, error)
}

// Fleet is one pool's fleet on one cluster namespace (the namespace of
// the pool's SandboxTemplates and warm pools, where claims are made).
type Fleet struct {
	dyn       dynamic.Interface
	disc      discovery.DiscoveryInterface
	pool, ns  string
	applier   Applier
	prover    Prover
	stopWait  time.Duration
	pollEvery time.Duration
}

var (
	_ rollout.Fleet        = (*Fleet)(nil)
	_ rollout.Checkpointer = (*Fleet)(nil)
)

// Option configures New.
type Option func(*Fleet) error

// WithApplier is the Applier Sync calls (without one, Sync only reads the
// revision back: something else applies, as Argo CD's automated sync).
func WithApplier(a Applier) Option {
	return func(f *Fleet) error { f.applier = a; return nil }
}

// WithProver is the Prover Prove delegates to.
func WithProver(p Prover) Option {
	return func(f *Fleet) error { f.prover = p; return nil }
}

// WithStopTimeout bounds how long Stop waits for the stopped sandboxes to
// be gone (default 2m).
func WithStopTimeout(d time.Duration) Option {
	return func(f *Fleet) error {
		if d <= 0 {
			return fmt.Errorf("kubefleet: stop timeout %s is not above 0", d)
		}
		f.stopWait = d
		return nil
	}
}

// New returns the fleet of pool in namespace ns of the cluster cfg points at.
func New(cfg *rest.Config, pool, ns string, opts ...Option) (*Fleet, error) {
	if pool == "" || ns == "" {
		return nil, errors.New("kubefleet: a pool and a namespace are required")
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = 50, 100
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second // an API server that went away must not hang a step
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubefleet: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubefleet: %w", err)
	}
	f := &Fleet{dyn: dyn, disc: disc, pool: pool, ns: ns, stopWait: 2 * time.Minute, pollEvery: 250 * time.Millisecond}
	for _, o := range opts {
		if err := o(f); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Info says what this control plane speaks (the protocols of this build
// of Slipway, as the runtime does) once the cluster answers and serves
// agent-sandbox's extensions API, with the revision the pool's objects
// carry.
func (f *Fleet) Info(ctx context.Context) (*runtimeapi.Info, error) {
	for _, gv := range []schema.GroupVersion{SandboxTemplates.GroupVersion(), Sandboxes.GroupVersion()} {
		if _, err := f.disc.ServerResourcesForGroupVersion(gv.String()); err != nil {
			return nil, fmt.Errorf("%w: the API server does not serve %s (is agent-sandbox v0.5.6 installed?): %w", ErrCluster, gv, err)
		}
	}
	info := &runtimeapi.Info{
		ControlPlaneProtocol: runtimeapi.ProtocolRange{Min: runtime.MinControlPlaneProtocol, Max: runtime.ControlPlaneProtocol},
		RunnerProtocol:       runtimeapi.ProtocolRange{Min: runner.MinProtocolVersion, Max: runner.ProtocolVersion},
		Limits:               runtimeapi.LimitsInfo{Cgroup: "none", Enforced: []string{}, Description: "the pod's: the generation's runtimeClassName and the template's container resources"},
		Network:              "the SandboxTemplate's networkPolicy (the pool's network)",
	}
	if rev, err := f.observed(ctx); err == nil {
		info.ObservedRevision, info.ObservedAt = rev, time.Now().UTC()
	} else if !errors.Is(err, ErrNotSynced) {
		info.LastSyncError = err.Error()
	}
	return info, nil
}

// Sync has the applier apply the branch head (when the fleet has one) and
// returns the revision the pool's templates and warm pools carry in the
// cluster. Members of warm pools that are gone are deleted on the way.
func (f *Fleet) Sync(ctx context.Context) (string, error) {
	applied := ""
	if f.applier != nil {
		rev, err := f.applier.Sync(ctx)
		if err != nil {
			return "", err
		}
		applied = rev
	}
	if err := f.collect(ctx); err != nil {
		return "", err
	}
	rev, err := f.observed(ctx)
	if err != nil {
		return "", err
	}
	if applied != "" && rev != applied {
		return "", fmt.Errorf("%w: pool %s: the applier reports %s, the cluster's objects carry %s", ErrNotSynced, f.pool, short(applied), short(rev))
	}
	return rev, nil
}

// observed is the config revision every template and warm pool of the
// pool carries (objects being deleted aside).
func (f *Fleet) observed(ctx context.Context) (string, error) {
	revs := map[string][]string{}
	for _, gvr := range []schema.GroupVersionResource{SandboxTemplates, SandboxWarmPools} {
		list, err := f.list(ctx, gvr, kubeobjects.LabelPool+"="+f.pool)
		if err != nil {
			return "", err
		}
		for _, u := range list {
			if u.GetDeletionTimestamp() != nil {
				continue
			}
			rev := u.GetAnnotations()[kubeobjects.AnnotationConfigRevision]
			revs[rev] = append(revs[rev], u.GetKind()+"/"+u.GetName())
		}
	}
	switch len(revs) {
	case 0:
		return "", fmt.Errorf("%w: namespace %s holds no SandboxTemplate or SandboxWarmPool of pool %s", ErrNotSynced, f.ns, f.pool)
	case 1:
		for rev, objs := range revs {
			if rev == "" {
				return "", fmt.Errorf("%w: %s of pool %s carry no %s annotation", ErrNotSynced, strings.Join(objs, ", "), f.pool, kubeobjects.AnnotationConfigRevision)
			}
			return rev, nil
		}
	}
	var parts []string
	for rev, objs := range revs {
		sort.Strings(objs)
		parts = append(parts, fmt.Sprintf("%s on %s", orNone(short(rev)), strings.Join(objs, ", ")))
	}
	sort.Strings(parts)
	return "", fmt.Errorf("%w: the objects of pool %s carry different config revisions: %s", ErrNotSynced, f.pool, strings.Join(parts, "; "))
}

// Prove runs the proof checks through the fleet's Prover.
func (f *Fleet) Prove(ctx context.Context, pool string, req runtimeapi.ProofRequest) (*runtimeapi.ProofResult, error) {
	if err := f.check(pool); err != nil {
		return nil, err
	}
	if f.prover == nil {
		return nil, fmt.Errorf("%w: pool %s: proofs run through the runtime on the Kubernetes backend, and none was given", ErrNoProver, pool)
	}
	return f.prover.Prove(ctx, pool, req)
}

// Mover moves a generation's open runs through checkpoints onto the
// pool's active generation (the runtime on the Kubernetes backend with
// --checkpoint-key does: runtimeapi.Client).
type Mover interface {
	CheckpointGeneration(ctx context.Context, pool, generation string) (*runtimeapi.CheckpointGenerationResult, error)
}

// CheckpointGeneration is the drain deadline with onDrainDeadline:
// checkpoint on a cluster: the runs are the runtime's (it holds their
// claims), so the fleet's Prover, when it is that runtime (a Mover), moves
// them; none is an error that names what is missing.
func (f *Fleet) CheckpointGeneration(ctx context.Context, pool, generation string) (*runtimeapi.CheckpointGenerationResult, error) {
	if err := f.check(pool); err != nil {
		return nil, err
	}
	m, ok := f.prover.(Mover)
	if !ok {
		return nil, fmt.Errorf("%w: pool %s: runs are checkpointed by the runtime on the Kubernetes backend that holds them (rollout --prover URL, a runtime serving with --checkpoint-key), and none was given", ErrNoProver, pool)
	}
	return m.CheckpointGeneration(ctx, pool, generation)
}

func (f *Fleet) check(pool string) error {
	if pool != f.pool {
		return fmt.Errorf("kubefleet: this fleet runs pool %s, not %s", f.pool, pool)
	}
	return nil
}

// list lists gvr in the fleet's namespace with a label selector.
func (f *Fleet) list(ctx context.Context, gvr schema.GroupVersionResource, selector string) ([]unstructured.Unstructured, error) {
	l, err := f.dyn.Resource(gvr).Namespace(f.ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("%w: list %s in namespace %s: %w", ErrCluster, gvr.Resource, f.ns, err)
	}
	items := l.Items
	slices.SortFunc(items, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	return items, nil
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
