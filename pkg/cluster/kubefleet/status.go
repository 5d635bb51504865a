package kubefleet

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// agent-sandbox's names.
const (
	kindWarmPool      = "SandboxWarmPool"
	kindClaim         = "SandboxClaim"
	annotationBound   = "agents.x-k8s.io/sandbox-name"
	annotationPodName = "agents.x-k8s.io/pod-name"
	conditionReady    = "Ready"
)

// view is the pool's objects in the namespace at one moment.
type view struct {
	gens      map[string]*runtimeapi.GenerationStatus // by generation id
	byName    map[string]string                       // template or warm pool name → generation id
	byLabel   map[string]string                       // slipway.dev/generation label → generation id
	warmPools map[string]bool                         // UIDs of the pool's live warm pools
	sandboxes []member
	claims    []claim
}

// member is one Sandbox of the pool.
type member struct {
	u     unstructured.Unstructured
	gen   string
	owner metav1OwnerRef
	ready bool
}

type metav1OwnerRef struct{ kind, name, uid string }

// claim is one SandboxClaim on a warm pool of the pool.
type claim struct {
	u       unstructured.Unstructured
	gen     string
	sandbox string // bound sandbox's name, "" while unbound
	proof   bool
}

// run names the claim's run: its owner (the runtime's run id) on a claim
// Slipway made, else the claim's name (a claim made by someone else).
func (c claim) run() string {
	if o := c.u.GetAnnotations()[kubeobjects.AnnotationOwner]; o != "" {
		return o
	}
	return c.u.GetName()
}

// read lists the pool's templates, warm pools, sandboxes and claims.
func (f *Fleet) read(ctx context.Context) (*view, error) {
	v := &view{gens: map[string]*runtimeapi.GenerationStatus{}, byName: map[string]string{}, byLabel: map[string]string{}, warmPools: map[string]bool{}}
	gen := func(id string) *runtimeapi.GenerationStatus {
		g, ok := v.gens[id]
		if !ok {
			g = &runtimeapi.GenerationStatus{ID: id, Runs: []string{}}
			v.gens[id] = g
		}
		return g
	}
	templates, err := f.list(ctx, SandboxTemplates, kubeobjects.LabelPool+"="+f.pool)
	if err != nil {
		return nil, err
	}
	warm, err := f.list(ctx, SandboxWarmPools, kubeobjects.LabelPool+"="+f.pool)
	if err != nil {
		return nil, err
	}
	for _, u := range append(templates, warm...) {
		id := u.GetAnnotations()[kubeobjects.AnnotationGenerationID]
		if id == "" {
			continue // one of the pool's own objects
		}
		v.byName[u.GetName()] = id
		v.byLabel[kubeobjects.GenerationLabel(id)] = id
		g := gen(id)
		if u.GetKind() == kindWarmPool && u.GetDeletionTimestamp() == nil {
			v.warmPools[string(u.GetUID())] = true
			g.State = "warm"
		}
	}
	sbs, err := f.list(ctx, Sandboxes, "")
	if err != nil {
		return nil, err
	}
	for _, u := range sbs {
		labels, _, _ := unstructured.NestedStringMap(u.Object, "spec", "podTemplate", "metadata", "labels")
		if labels[kubeobjects.LabelPool] != f.pool {
			continue
		}
		id, ok := v.byLabel[labels[kubeobjects.LabelGeneration]]
		if !ok {
			id = labels[kubeobjects.LabelGeneration] // its template is gone: the label is all that names it
		}
		m := member{u: u, gen: id, ready: ready(u)}
		for _, o := range u.GetOwnerReferences() {
			if o.Controller != nil && *o.Controller {
				m.owner = metav1OwnerRef{kind: o.Kind, name: o.Name, uid: string(o.UID)}
			}
		}
		v.sandboxes = append(v.sandboxes, m)
	}
	bySandbox := map[string]string{}
	for _, m := range v.sandboxes {
		bySandbox[m.u.GetName()] = m.gen
	}
	cls, err := f.list(ctx, SandboxClaims, "")
	if err != nil {
		return nil, err
	}
	for _, u := range cls {
		c := claim{u: u, proof: u.GetLabels()[LabelProof] == "true"}
		c.sandbox, _, _ = unstructured.NestedString(u.Object, "status", "sandbox", "name")
		if c.sandbox == "" {
			c.sandbox = u.GetAnnotations()[annotationBound]
		}
		id, ok := bySandbox[c.sandbox]
		if !ok || c.sandbox == "" {
			ref, _, _ := unstructured.NestedString(u.Object, "spec", "warmPoolRef", "name")
			if id, ok = v.byName[ref]; !ok {
				continue // a claim of another pool
			}
		}
		c.gen = id
		v.claims = append(v.claims, c)
	}
	return v, nil
}

// ready reports a Sandbox's Ready condition.
func ready(u unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == conditionReady && m["status"] == "True" {
			return true
		}
	}
	return false
}

// PoolStatus counts per generation the warm members (ready or warming)
// and the open runs: bound claims that are not proof claims.
func (f *Fleet) PoolStatus(ctx context.Context, pool string) (*runtimeapi.PoolStatus, error) {
	if err := f.check(pool); err != nil {
		return nil, err
	}
	v, err := f.read(ctx)
	if err != nil {
		return nil, err
	}
	gen := func(id string) *runtimeapi.GenerationStatus {
		g, ok := v.gens[id]
		if !ok {
			g = &runtimeapi.GenerationStatus{ID: id, Runs: []string{}}
			v.gens[id] = g
		}
		return g
	}
	for _, m := range v.sandboxes {
		if m.u.GetDeletionTimestamp() != nil && m.owner.kind == kindWarmPool {
			continue // a warm member on its way out is no capacity
		}
		g := gen(m.gen)
		s := runtimeapi.SandboxStatus{ID: m.u.GetName(), TemplateID: m.u.GetAnnotations()["agents.x-k8s.io/sandbox-template-ref"], State: string(sandbox.StateRunning)}
		switch {
		case m.owner.kind == kindWarmPool && m.ready:
			g.Ready++
		case m.owner.kind == kindWarmPool:
			g.Warming++
			s.State = string(sandbox.StateStarting)
		default:
			s.Owner = m.owner.name
		}
		g.Sandboxes = append(g.Sandboxes, s)
	}
	for _, c := range v.claims {
		if c.proof || c.sandbox == "" || c.u.GetDeletionTimestamp() != nil {
			continue
		}
		g := gen(c.gen)
		g.Claimed++
		g.Runs = append(g.Runs, c.run())
	}
	out := &runtimeapi.PoolStatus{Pool: f.pool, Generations: []runtimeapi.GenerationStatus{}}
	if rev, err := f.observed(ctx); err == nil {
		out.ObservedRevision = rev
	}
	for _, g := range v.gens {
		sort.Strings(g.Runs)
		out.Generations = append(out.Generations, *g)
	}
	sort.Slice(out.Generations, func(i, j int) bool { return out.Generations[i].ID < out.Generations[j].ID })
	return out, nil
}

func (m member) String() string {
	return fmt.Sprintf("Sandbox/%s/%s", m.u.GetNamespace(), m.u.GetName())
}
