package kubesandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// LabelRun marks a Secret that holds a credential of one run (its value is
// the run id): the reconciler deletes it once its run is final or absent.
const LabelRun = "slipway.dev/run"

var (
	secretsGVR = schemaGVR{Version: "v1", Resource: "secrets"}

	_ sandbox.Objects = (*Backend)(nil)
)

var gvrOf = map[string]schemaGVR{
	sandbox.KindClaim: claimsGVR, sandbox.KindSandbox: sandboxesGVR, sandbox.KindPod: podsGVR,
	sandbox.KindWarmPool: warmPoolsGVR, sandbox.KindSecret: secretsGVR,
}

// Objects lists what Slipway made or rendered in the namespace, and what
// those control: its SandboxClaims, the SandboxWarmPools render made, the
// Sandboxes labelled with a pool or controlled by one of those claims or
// warm pools, the pods labelled with a pool, and the Secrets of runs
// (LabelRun). It reads the cluster each time (nothing cached).
func (b *Backend) Objects(ctx context.Context) ([]sandbox.Object, error) {
	list := func(kind, sel string) ([]unstructured.Unstructured, error) {
		l, err := b.dyn.Resource(gvrOf[kind]).Namespace(b.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("kube: list %ss in %s: %w", kind, b.namespace, err)
		}
		return l.Items, nil
	}
	var out []sandbox.Object
	mine := map[string]sandbox.Object{} // claims and warm pools by Kind/name
	claims, err := list(sandbox.KindClaim, LabelClaim+"=true")
	if err != nil {
		return nil, err
	}
	for i := range claims {
		o := b.claimObjectOf(&claims[i])
		mine[o.Ref()] = o
		out = append(out, o)
	}
	pools, err := list(sandbox.KindWarmPool, kubeobjects.LabelPool)
	if err != nil {
		return nil, err
	}
	for i := range pools {
		o := objectOf(sandbox.KindWarmPool, &pools[i])
		mine[o.Ref()] = o
		out = append(out, o)
	}
	sbs, err := list(sandbox.KindSandbox, "")
	if err != nil {
		return nil, err
	}
	for i := range sbs {
		o := objectOf(sandbox.KindSandbox, &sbs[i])
		ctl, ok := mine[o.Controller]
		ok = ok && ctl.UID == o.ControllerUID
		if o.Pool == "" && !ok {
			continue // not Slipway's
		}
		o = sandboxObjectOf(&sbs[i], ctl)
		out = append(out, o)
	}
	for _, k := range []string{sandbox.KindPod, sandbox.KindSecret} {
		sel := kubeobjects.LabelPool
		if k == sandbox.KindSecret {
			sel = LabelRun
		}
		items, err := list(k, sel)
		if err != nil {
			return nil, err
		}
		for i := range items {
			o := objectOf(k, &items[i])
			if k == sandbox.KindSecret {
				o.Owner = items[i].GetLabels()[LabelRun]
			}
			out = append(out, o)
		}
	}
	// a claim's dependents: its Sandbox and that Sandbox's pod
	byController := map[string]sandbox.Object{} // controller UID -> the Sandbox or pod it controls
	for _, o := range out {
		if (o.Kind == sandbox.KindSandbox || o.Kind == sandbox.KindPod) && o.ControllerUID != "" {
			byController[o.Kind+"/"+o.ControllerUID] = o
		}
	}
	for i := range out {
		if out[i].Kind != sandbox.KindClaim {
			continue
		}
		if sb, ok := byController[sandbox.KindSandbox+"/"+out[i].UID]; ok && sb.Name == out[i].Bound {
			out[i].Dependents = append(out[i].Dependents, sb)
			if pod, ok := byController[sandbox.KindPod+"/"+sb.UID]; ok {
				out[i].Dependents = append(out[i].Dependents, pod)
			}
		}
	}
	return out, nil
}

// deleteListed deletes claim o and its dependents as listed (each on the
// precondition of the UID it was listed with, the claim also of its
// resourceVersion), without reading them again, and waits until all are
// gone.
func (b *Backend) deleteListed(ctx context.Context, o sandbox.Object, force bool) error {
	background := metav1.DeletePropagationBackground
	all := append([]sandbox.Object{o}, o.Dependents...)
	for i, d := range all {
		uid := types.UID(d.UID)
		opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &background}
		if i == 0 {
			rv := d.ResourceVersion
			opts.Preconditions.ResourceVersion = &rv
		}
		if force && d.Kind == sandbox.KindPod {
			opts.GracePeriodSeconds = new(int64)
		}
		err := b.dyn.Resource(gvrOf[d.Kind]).Namespace(b.namespace).Delete(ctx, d.Name, opts)
		switch {
		case apierrors.IsNotFound(err):
		case apierrors.IsConflict(err) && i == 0:
			return fmt.Errorf("%w: kube: SandboxClaim %s/%s changed since it was read (resourceVersion %s): %v", sandbox.ErrOwnerConflict, b.namespace, d.Name, d.ResourceVersion, err)
		case apierrors.IsConflict(err):
			// another object of that name now: not the claim's any more
		case err != nil:
			return fmt.Errorf("kube: delete %s %s/%s: %w", d.Kind, b.namespace, d.Name, err)
		}
	}
	b.mu.Lock()
	delete(b.claims, o.Name)
	delete(b.claims, o.Bound)
	b.mu.Unlock()
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, d := range all {
		wg.Go(func() { errs[i] = b.untilGone(ctx, d.Kind, gvrOf[d.Kind], d.Name, types.UID(d.UID)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i := range o.Dependents {
		if d := &o.Dependents[i]; d.Kind == sandbox.KindSandbox && d.Name == o.Bound {
			b.release(&o, d)
		}
	}
	return nil
}

// readySince is the lastTransitionTime of u's Ready condition (zero:
// none, or unreadable).
func readySince(u *unstructured.Unstructured) time.Time {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" {
			s, _ := m["lastTransitionTime"].(string)
			t, err := time.Parse(time.RFC3339, s)
			if err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

// objectOf is what every kind says of u.
func objectOf(kind string, u *unstructured.Unstructured) sandbox.Object {
	o := sandbox.Object{Kind: kind, Name: u.GetName(), UID: string(u.GetUID()), ResourceVersion: u.GetResourceVersion(),
		Pool: u.GetLabels()[kubeobjects.LabelPool], Generation: u.GetAnnotations()[kubeobjects.AnnotationGenerationID],
		Created: u.GetCreationTimestamp().Time, Finalizers: u.GetFinalizers()}
	if o.Generation == "" {
		o.Generation = u.GetLabels()[kubeobjects.LabelGeneration]
	}
	if t := u.GetDeletionTimestamp(); t != nil {
		o.Deleting = t.Time
	}
	if ref := metav1.GetControllerOf(u); ref != nil {
		o.Controller, o.ControllerUID = ref.Kind+"/"+ref.Name, string(ref.UID)
	}
	return o
}

// DeleteObject deletes o on the precondition that its UID and
// resourceVersion are still o's (sandbox.ErrOwnerConflict when either
// changed), with background propagation, and waits until it is gone. A
// claim goes with the Sandbox and pod it got (as Delete does). force
// deletes a pod (a claim's pod) at once, without waiting for its kubelet.
// Gone already is no error.
func (b *Backend) DeleteObject(ctx context.Context, o sandbox.Object, force bool) error {
	if o.Kind == sandbox.KindClaim {
		var err error
		if len(o.Dependents) > 0 {
			err = b.deleteListed(ctx, o, force)
		} else {
			err = b.deleteClaimAt(ctx, o.Name, types.UID(o.UID), o.ResourceVersion, o.Bound, force, &o)
		}
		if err == nil {
			b.stopEgress(o.Bound)
		}
		return err
	}
	gvr, ok := gvrOf[o.Kind]
	if !ok {
		return fmt.Errorf("kube: delete %s: unknown kind", o.Ref())
	}
	res := b.dyn.Resource(gvr).Namespace(b.namespace)
	uid, rv := types.UID(o.UID), o.ResourceVersion
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}, PropagationPolicy: &background}
	if force && o.Kind == sandbox.KindPod {
		opts.GracePeriodSeconds = new(int64)
	}
	var pod *unstructured.Unstructured
	if o.Kind == sandbox.KindSandbox {
		// its pod goes with it, without waiting for a garbage collector
		if sb, err := res.Get(ctx, o.Name, metav1.GetOptions{}); err == nil && string(sb.GetUID()) == o.UID {
			name := sb.GetAnnotations()[annotationPodName]
			if name == "" {
				name = o.Name
			}
			if p, err := b.dyn.Resource(podsGVR).Namespace(b.namespace).Get(ctx, name, metav1.GetOptions{}); err == nil && metav1.IsControlledBy(p, sb) {
				pod = p
			}
		}
	}
	err := res.Delete(ctx, o.Name, opts)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("%w: kube: %s %s/%s changed since it was read (resourceVersion %s): %v", sandbox.ErrOwnerConflict, o.Kind, b.namespace, o.Name, rv, err)
	case err != nil:
		return fmt.Errorf("kube: delete %s %s/%s: %w", o.Kind, b.namespace, o.Name, err)
	}
	if pod != nil {
		po := objectOf(sandbox.KindPod, pod)
		if err := b.DeleteObject(ctx, po, force); err != nil && !errors.Is(err, sandbox.ErrOwnerConflict) {
			return err
		}
	}
	if err := b.untilGone(ctx, o.Kind, gvr, o.Name, uid); err != nil {
		return err
	}
	if o.Kind == sandbox.KindSandbox {
		b.release(nil, &o) // a warm member's idle time ends here, however short
	}
	return nil
}
