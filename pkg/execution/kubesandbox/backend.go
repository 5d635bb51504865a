package kubesandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/execution/egress"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// Labels and annotations of the SandboxClaims the backend makes (besides
// kubeobjects.LabelPool and kubeobjects.LabelGeneration).
const (
	// LabelClaim marks a SandboxClaim as Slipway's: List reads only those.
	LabelClaim = "slipway.dev/claim"
	// LabelProof marks a rollout's proof claim: it never counts as traffic.
	LabelProof = "slipway.dev/proof"
	// AnnotationOwner is the claim's owner (the runtime's run id, or a
	// proof claim's id); the claim's name is made from it (ClaimName).
	AnnotationOwner = kubeobjects.AnnotationOwner
	// AnnotationRunnerSHA256 is the runner binary's digest the claim's
	// runner must prove.
	AnnotationRunnerSHA256 = "slipway.dev/runner-sha256"
	// AnnotationTemplateID is the template's manifest digest the claim's
	// pod must run.
	AnnotationTemplateID = "slipway.dev/template-id"
)

// agent-sandbox's names (sigs.k8s.io/agent-sandbox v0.5.6).
const (
	annotationSandboxName = "agents.x-k8s.io/sandbox-name"
	annotationPodName     = "agents.x-k8s.io/pod-name"
	labelLaunchType       = "agents.x-k8s.io/launch-type"
)

var (
	claimsGVR    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	warmPoolsGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	sandboxesGVR = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	podsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nodesGVR     = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

// Named defaults.
const (
	// DefaultReadyTimeout bounds how long Create waits for a claim to be
	// bound to a ready sandbox when its context has no deadline.
	DefaultReadyTimeout = 2 * time.Minute
	// DefaultDeleteTimeout bounds how long Delete waits to see the claim,
	// its Sandbox and its pod gone when its context has no deadline.
	DefaultDeleteTimeout = 2 * time.Minute
	// cleanupTimeout bounds the cleanup of a Create that failed.
	cleanupTimeout = time.Minute
)

// Backend makes sandboxes on a Kubernetes cluster running agent-sandbox:
// a sandbox is a SandboxClaim on the warm pool render made for its
// generation. It implements sandbox.ClusterPools: the cluster keeps the
// warm pools. Its methods are safe for concurrent use.
type Backend struct {
	cfg       *rest.Config
	dyn       dynamic.Interface
	namespace string
	o         options

	mu        sync.Mutex
	claims    map[string]string // sandbox id -> claim name, as Create and List saw them
	nodes     map[string]nodeInfo
	followers map[string]*follower      // sandbox id -> its egress log follower
	warm      provenWarm                // warm members' runners proved (ProveWarm)
	seen      seenObjects               // the Sandboxes as ProveWarm's watch saw them
	pods      seenObjects               // the pods as ProveWarm's watch saw them
	awaiting  map[string]int            // claim name -> Creates awaiting it
	lastClaim time.Time                 // when the last Create stopped awaiting its claim
	handed    map[string]*runner.Pinger // pod -> the kept pinger handed to its claim (kept.go)
	// pathProofs counts the runners proved on a claim's path (tests)
	pathProofs atomic.Int64
}

var (
	_ sandbox.Backend      = (*Backend)(nil)
	_ sandbox.ClusterPools = (*Backend)(nil)
)

// Option configures New.
type Option func(*options) error

type options struct {
	cluster       string
	readyTimeout  time.Duration
	deleteTimeout time.Duration
	egressRecord  func(sandboxID string, a egress.Attempt)
	released      func(Release)
	// dial reaches a pod's runner (DialRunner; tests count the dials)
	dial func(cfg *rest.Config, namespace, pod string) runner.DialFunc
}

// WithClusterName names the cluster in run manifests (default: the API
// server's host).
func WithClusterName(name string) Option {
	return func(o *options) error {
		if name == "" {
			return errors.New("kube: empty cluster name")
		}
		o.cluster = name
		return nil
	}
}

// WithReadyTimeout bounds how long Create waits for a claim to be bound and
// its sandbox ready (when its context's deadline is not sooner); a claim
// not ready by then is deleted with everything it got.
func WithReadyTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("kube: ready timeout %s is not positive", d)
		}
		o.readyTimeout = d
		return nil
	}
}

// New is a backend making claims in namespace through the API server of
// cfg.
func New(cfg *rest.Config, namespace string, opts ...Option) (*Backend, error) {
	if namespace == "" {
		return nil, errors.New("kube: no namespace")
	}
	o := options{readyTimeout: DefaultReadyTimeout, deleteTimeout: DefaultDeleteTimeout, dial: DialRunner}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.cluster == "" {
		o.cluster = strings.TrimPrefix(strings.TrimPrefix(cfg.Host, "https://"), "http://")
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 200, 400 // claims are API calls: the client's 5 a second would be the bottleneck
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	return &Backend{cfg: cfg, dyn: dyn, namespace: namespace, o: o, claims: map[string]string{}, nodes: map[string]nodeInfo{},
		followers: map[string]*follower{}, warm: provenWarm{byName: map[string]warmProof{}},
		awaiting: map[string]int{}, handed: map[string]*runner.Pinger{}}, nil
}

// dialer reaches the runner of pod.
func (b *Backend) dialer(pod string) runner.DialFunc { return b.o.dial(b.cfg, b.namespace, pod) }

// awaiting1 marks claim name awaited by a Create until the returned func is
// called.
func (b *Backend) awaiting1(name string) (done func()) {
	b.mu.Lock()
	b.awaiting[name]++
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.awaiting[name]--; b.awaiting[name] <= 0 {
			delete(b.awaiting, name)
		}
		b.lastClaim = time.Now()
	}
}

// claimsQuiet says whether no Create awaits a claim now and none has for
// the last d.
func (b *Backend) claimsQuiet(d time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.awaiting) == 0 && time.Since(b.lastClaim) >= d
}

// awaited says whether a Create awaits claim name.
func (b *Backend) awaited(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.awaiting[name] > 0
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// ClaimName is the name of the SandboxClaim of owner: "sw-" and the owner
// lower-cased, other characters than a-z, 0-9 and '-' made '-', cut to 63
// characters with 8 hex digits of the owner's sha256 at the end when it is
// longer or was changed. A runtime that restarts finds its claims by it.
func ClaimName(owner string) string {
	s := "sw-" + strings.Trim(nonName.ReplaceAllString(strings.ToLower(owner), "-"), "-")
	if s != "sw-"+owner || len(s) > 63 {
		sum := sha256.Sum256([]byte(owner))
		s = strings.TrimRight(s[:min(len(s), 54)], "-") + "-" + hex.EncodeToString(sum[:4])
	}
	return s
}

// Create claims a sandbox of spec.Generation for spec.Owner: a
// SandboxClaim named ClaimName(spec.Owner) on the generation's warm pool
// (kubeobjects.ObjectName), which agent-sandbox's controller binds to a ready
// warm member, or to a cold start where none is ready. A claim of that name
// already there (a runtime that restarted mid-claim) is taken up, if its
// owner is spec.Owner. Create returns once the claim is bound, its sandbox
// Ready, its pod's images the pinned ones and its runner proved the binary,
// generation and sandbox expected; on error (the claim not ready in time
// among them) the claim is deleted with everything it got.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (*sandbox.Sandbox, error) {
	if spec.Owner == "" || spec.Owner == sandbox.OwnerWarm {
		return nil, fmt.Errorf("%w: owner %q: the cluster keeps the warm pools (SandboxWarmPool); Create makes claims only", sandbox.ErrInvalidSpec, spec.Owner)
	}
	if spec.Pool == "" || spec.Generation == "" {
		return nil, fmt.Errorf("%w: a claim names its pool and generation", sandbox.ErrInvalidSpec)
	}
	if len(spec.Env) > 0 {
		return nil, fmt.Errorf("%w: env: a claim's environment would force a cold start; the generation's template holds it", sandbox.ErrInvalidSpec)
	}
	if spec.Network != "" && spec.Network != sandbox.NetworkDeny && spec.Network != sandbox.NetworkAllowList {
		return nil, fmt.Errorf("%w: network %q: want deny or allow-list", sandbox.ErrInvalidSpec, spec.Network)
	}
	created := time.Now()
	name := ClaimName(spec.Owner)
	defer b.awaiting1(name)()
	claims := b.dyn.Resource(claimsGVR).Namespace(b.namespace)
	early := b.watchBeside(ctx, name)
	defer early.stop()
	c, err := claims.Create(ctx, b.claimObject(name, spec), metav1.CreateOptions{FieldManager: "slipway"})
	if apierrors.IsAlreadyExists(err) {
		early.stop() // it may see the claim taken up, or one of that name going: await opens its own
		c, err = claims.Get(ctx, name, metav1.GetOptions{})
		if err == nil && c.GetAnnotations()[AnnotationOwner] != spec.Owner {
			return nil, fmt.Errorf("%w: SandboxClaim %s/%s belongs to %q, not %q", sandbox.ErrOwnerConflict, b.namespace, name, c.GetAnnotations()[AnnotationOwner], spec.Owner)
		}
		if err == nil {
			created = c.GetCreationTimestamp().Time
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kube: create SandboxClaim %s/%s: %w", b.namespace, name, err)
	}
	s, err := b.await(ctx, c, early.take(), spec, created)
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if derr := b.deleteClaim(cctx, name, c.GetUID()); derr != nil {
			err = fmt.Errorf("%w (and its cleanup failed: %v)", err, derr)
		}
		return nil, err
	}
	return s, nil
}

func (b *Backend) claimObject(name string, spec sandbox.Spec) *unstructured.Unstructured {
	labels := map[string]any{LabelClaim: "true", kubeobjects.LabelPool: spec.Pool, kubeobjects.LabelGeneration: kubeobjects.GenerationLabel(spec.Generation)}
	if spec.Proof {
		labels[LabelProof] = "true"
	}
	ann := map[string]any{AnnotationOwner: spec.Owner, kubeobjects.AnnotationGenerationID: spec.Generation}
	if spec.Runner.Digest != "" {
		ann[AnnotationRunnerSHA256] = spec.Runner.Digest
	}
	if spec.TemplateID != "" {
		ann[AnnotationTemplateID] = spec.TemplateID
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kubeobjects.ExtensionsAPIVersion, "kind": "SandboxClaim",
		"metadata": map[string]any{"name": name, "namespace": b.namespace, "labels": labels, "annotations": ann},
		"spec":     map[string]any{"warmPoolRef": map[string]any{"name": kubeobjects.ObjectName(spec.Pool, spec.Generation)}},
	}}
}

// Health reports whether the backend can reach the API server and read
// agent-sandbox's warm pools in its namespace.
func (b *Backend) Health(ctx context.Context) error {
	if _, err := b.dyn.Resource(warmPoolsGVR).Namespace(b.namespace).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("%w: kube: list SandboxWarmPools in %s: %v", sandbox.ErrUnavailable, b.namespace, err)
	}
	return nil
}

// SetOwner is refused: a claim's owner is its name and never changes
// (the cluster hands warm members to claims, not the runtime).
func (b *Backend) SetOwner(ctx context.Context, id, from, to string) (*sandbox.Sandbox, error) {
	return nil, fmt.Errorf("%w: kube: sandbox %s: a claim's owner never changes", sandbox.ErrOwnerConflict, id)
}

// WarmCounts counts the warm members of each generation of pool from its
// SandboxWarmPools' status.
func (b *Backend) WarmCounts(ctx context.Context, pool string) (map[string]sandbox.WarmCount, error) {
	list, err := b.dyn.Resource(warmPoolsGVR).Namespace(b.namespace).List(ctx, metav1.ListOptions{LabelSelector: kubeobjects.LabelPool + "=" + pool})
	if err != nil {
		return nil, fmt.Errorf("kube: list SandboxWarmPools of pool %s: %w", pool, err)
	}
	out := map[string]sandbox.WarmCount{}
	for _, wp := range list.Items {
		id := wp.GetAnnotations()[kubeobjects.AnnotationGenerationID]
		if id == "" {
			continue
		}
		want, _, _ := unstructured.NestedInt64(wp.Object, "spec", "replicas")
		have, _, _ := unstructured.NestedInt64(wp.Object, "status", "replicas")
		ready, _, _ := unstructured.NestedInt64(wp.Object, "status", "readyReplicas")
		c := out[id]
		c.Replicas += int(want)
		c.Ready += int(ready)
		c.Warming += max(0, int(have-ready))
		out[id] = c
	}
	return out, nil
}

// List returns the sandboxes of Slipway's SandboxClaims in the namespace
// (never the warm members: the cluster keeps those, see WarmCounts), oldest
// first. A claim not bound yet is listed under its claim's name, starting.
func (b *Backend) List(ctx context.Context, filter sandbox.Filter) ([]*sandbox.Sandbox, error) {
	sel := LabelClaim + "=true"
	if filter.Pool != "" {
		sel += "," + kubeobjects.LabelPool + "=" + filter.Pool
	}
	if filter.Generation != "" {
		sel += "," + kubeobjects.LabelGeneration + "=" + kubeobjects.GenerationLabel(filter.Generation)
	}
	list, err := b.dyn.Resource(claimsGVR).Namespace(b.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("kube: list SandboxClaims in %s: %w", b.namespace, err)
	}
	var out []*sandbox.Sandbox
	for i := range list.Items {
		s := b.sandboxOf(&list.Items[i])
		if filter.Match(s) {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(x, y *sandbox.Sandbox) int { return x.Created.Compare(y.Created) })
	return out, nil
}

// sandboxOf is the sandbox a claim stands for, as far as the claim says.
func (b *Backend) sandboxOf(c *unstructured.Unstructured) *sandbox.Sandbox {
	ann := c.GetAnnotations()
	s := &sandbox.Sandbox{
		Pool: c.GetLabels()[kubeobjects.LabelPool], Generation: ann[kubeobjects.AnnotationGenerationID], Owner: ann[AnnotationOwner],
		TemplateID: ann[AnnotationTemplateID], RunnerBinarySHA256: ann[AnnotationRunnerSHA256],
		Created: c.GetCreationTimestamp().Time, RunnerPath: kubeobjects.RunnerBinary,
		Placement: &sandbox.Placement{Cluster: b.o.cluster, Namespace: b.namespace},
	}
	bound := boundName(c)
	ready, reason, _ := readyCondition(c)
	switch {
	case bound == "":
		s.ID, s.State = c.GetName(), sandbox.StateStarting
	case ready:
		s.ID, s.State = bound, sandbox.StateRunning
	case reason == "ClaimExpired" || reason == "SandboxExpired" || finished(c):
		s.ID, s.State = bound, sandbox.StateDead
	default:
		s.ID, s.State = bound, sandbox.StateStarting
	}
	if s.State != sandbox.StateDead {
		s.Runner = runner.NewClient(b.dialer(s.ID))
	}
	b.mu.Lock()
	b.claims[s.ID] = c.GetName()
	b.mu.Unlock()
	return s
}

// boundName is the Sandbox a claim is bound to ("" while it is not).
func boundName(c *unstructured.Unstructured) string {
	if n, _, _ := unstructured.NestedString(c.Object, "status", "sandbox", "name"); n != "" {
		return n
	}
	return c.GetAnnotations()[annotationSandboxName]
}

// readyCondition is an object's Ready condition: true or not, its reason
// and message.
func readyCondition(u *unstructured.Unstructured) (ready bool, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
			return m["status"] == "True", reason, message
		}
	}
	return false, "", ""
}

func finished(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Finished" && m["status"] == "True" {
			return true
		}
	}
	return false
}

type schemaGVR = schema.GroupVersionResource

// Confinement says how the cluster confines its sandboxes (GET /v1/info).
func (b *Backend) Confinement() (limits, network string) {
	return "the pod's: the generation's template (runtime class; Pod Security restricted: non-root, RuntimeDefault seccomp, no capabilities); a deadline per command",
		"the template's NetworkPolicy (agent-sandbox), enforced by the cluster's network plugin; an allow-list pool's egress proxy in the pod (container slipway-egress), logging every attempt; no port opened: the runner is reached through pod exec"
}
