package kubefleet

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// ErrStop: Stop could not end a generation's claims in time.
var ErrStop = errors.New("kubefleet: stop")

// Stop ends the open claims of a generation: each claim (proof claims
// aside: they are their rollout's) is deleted with its bound Sandbox and
// that Sandbox's Pod, and Stop returns once they are observed gone. The
// result lists the claims, as the runtime's does.
func (f *Fleet) Stop(ctx context.Context, pool, gen string) (*runtimeapi.StopResult, error) {
	if err := f.check(pool); err != nil {
		return nil, err
	}
	v, err := f.read(ctx)
	if err != nil {
		return nil, err
	}
	sbs := map[string]member{}
	for _, m := range v.sandboxes {
		sbs[m.u.GetName()] = m
	}
	out := &runtimeapi.StopResult{Stopped: []string{}}
	var gone []ref
	for _, c := range v.claims {
		if c.gen != gen || c.proof {
			continue
		}
		if err := f.remove(ctx, SandboxClaims, c.u); err != nil {
			return out, err
		}
		gone = append(gone, ref{SandboxClaims, c.u.GetName()})
		out.Stopped = append(out.Stopped, c.run())
		if m, ok := sbs[c.sandbox]; ok {
			g, err := f.removeSandbox(ctx, m.u)
			if err != nil {
				return out, err
			}
			gone = append(gone, g...)
		}
	}
	sort.Strings(out.Stopped)
	if err := f.waitGone(ctx, gone, f.stopWait); err != nil {
		return out, fmt.Errorf("%w: generation %s of pool %s: %w", ErrStop, gen, pool, err)
	}
	return out, nil
}

// ref names one object the fleet deleted.
type ref struct {
	gvr  schema.GroupVersionResource
	name string
}

func (r ref) String() string { return r.gvr.Resource + "/" + r.name }

// remove deletes u, as it was read (its UID a precondition).
func (f *Fleet) remove(ctx context.Context, gvr schema.GroupVersionResource, u unstructured.Unstructured) error {
	uid := u.GetUID()
	err := f.dyn.Resource(gvr).Namespace(f.ns).Delete(ctx, u.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("%w: delete %s/%s/%s: %w", ErrCluster, gvr.Resource, f.ns, u.GetName(), err)
	}
	return nil
}

// removeSandbox deletes a Sandbox and then its Pod (the Sandbox first, so
// its controller does not make the Pod again), and returns both refs.
func (f *Fleet) removeSandbox(ctx context.Context, sb unstructured.Unstructured) ([]ref, error) {
	if err := f.remove(ctx, Sandboxes, sb); err != nil {
		return nil, err
	}
	out := []ref{{Sandboxes, sb.GetName()}}
	name := sb.GetAnnotations()[annotationPodName]
	if name == "" {
		name = sb.GetName()
	}
	pod, err := f.dyn.Resource(pods).Namespace(f.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("%w: get pod %s/%s: %w", ErrCluster, f.ns, name, err)
	}
	if !ownedBy(*pod, sb.GetUID()) {
		return out, nil // not this Sandbox's to end
	}
	if err := f.remove(ctx, pods, *pod); err != nil {
		return out, err
	}
	return append(out, ref{pods, name}), nil
}

func ownedBy(u unstructured.Unstructured, uid types.UID) bool {
	for _, o := range u.GetOwnerReferences() {
		if o.Controller != nil && *o.Controller && o.UID == uid {
			return true
		}
	}
	return false
}

// waitGone polls until none of refs exists.
func (f *Fleet) waitGone(ctx context.Context, refs []ref, timeout time.Duration) error {
	end := time.Now().Add(timeout)
	for {
		var left []string
		for _, r := range refs {
			_, err := f.dyn.Resource(r.gvr).Namespace(f.ns).Get(ctx, r.name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				left = append(left, r.String()+" ("+err.Error()+")")
			default:
				left = append(left, r.String())
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("still there after %s: %s", timeout, strings.Join(left, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(f.pollEvery):
		}
	}
}

// collect deletes what the pool's gone owners left: Sandboxes of a warm
// pool or claim that no longer exists, and Pods of a Sandbox that no
// longer exists. It does not wait: PoolStatus counts them until they are
// gone.
func (f *Fleet) collect(ctx context.Context) error {
	v, err := f.read(ctx)
	if err != nil {
		return err
	}
	claims := map[string]bool{}
	for _, c := range v.claims {
		claims[string(c.u.GetUID())] = true
	}
	live := map[types.UID]bool{}
	for _, m := range v.sandboxes {
		orphan := (m.owner.kind == kindWarmPool && !v.warmPools[m.owner.uid]) || (m.owner.kind == kindClaim && !claims[m.owner.uid])
		if orphan {
			gvr := SandboxWarmPools
			if m.owner.kind == kindClaim {
				gvr = SandboxClaims
			}
			if orphan, err = f.gone(ctx, gvr, m.owner.name, types.UID(m.owner.uid)); err != nil {
				return err
			}
		}
		if !orphan {
			live[m.u.GetUID()] = true
			continue
		}
		if _, err := f.removeSandbox(ctx, m.u); err != nil {
			return err
		}
	}
	ps, err := f.list(ctx, pods, kubeobjects.LabelPool+"="+f.pool)
	if err != nil {
		return err
	}
	for _, p := range ps {
		for _, o := range p.GetOwnerReferences() {
			if o.Controller == nil || !*o.Controller || o.Kind != "Sandbox" || live[o.UID] || p.GetDeletionTimestamp() != nil {
				continue
			}
			gone, err := f.gone(ctx, Sandboxes, o.Name, o.UID)
			if err != nil {
				return err
			}
			if !gone {
				continue
			}
			if err := f.remove(ctx, pods, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// gone reports whether the owner name (with uid) no longer exists: read
// again, since it may have been made after the list that missed it.
func (f *Fleet) gone(ctx context.Context, gvr schema.GroupVersionResource, name string, uid types.UID) (bool, error) {
	u, err := f.dyn.Resource(gvr).Namespace(f.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: get %s/%s/%s: %w", ErrCluster, gvr.Resource, f.ns, name, err)
	}
	return u.GetUID() != uid, nil
}
