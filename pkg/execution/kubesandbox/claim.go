package kubesandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// ErrNotReady: a claim was not bound to a ready sandbox in time (it was
// deleted); the message says what its Ready condition said last.
var ErrNotReady = errors.New("kube: claim not ready")

// await waits until claim c is bound to a ready Sandbox, then checks its
// pod and its runner and returns the sandbox.
//
// What a claim reads besides its own watch is read as early as it can be,
// so that the grant does not wait for it once the claim is Ready:
// agent-sandbox names the Sandbox it adopts in the claim's annotations
// before it marks the claim Ready, and the pod named after it is read from
// then on (readPods); the Sandbox, adopted (controlled by this claim) and
// Ready, is taken from the backend's watch of Sandboxes (ProveWarm) when it
// has it. A pod read before the claim was Ready is checked exactly as a
// later one: should it fail a check, or name other pod IPs than the Ready
// claim, it is read again and that read decides.
func (b *Backend) await(ctx context.Context, c *unstructured.Unstructured, early watch.Interface, spec sandbox.Spec, created time.Time) (*sandbox.Sandbox, error) {
	wctx, cancel := context.WithTimeout(ctx, b.o.readyTimeout)
	defer cancel()
	pods := readPods{ctx: ctx, res: b.dyn.Resource(podsGVR).Namespace(b.namespace), reads: map[string]chan podRead{}, seen: &b.pods}
	c, err := b.watchReady(wctx, c, early, pods.start)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("kube: SandboxClaim %s/%s: %w", b.namespace, c.GetName(), ctx.Err())
		}
		return nil, err
	}
	name := boundName(c)
	// The runner's identity (a pod exec: the slowest step) is asked beside
	// the reads of the Sandbox and its pod; asked again should the Sandbox
	// name another pod. A warm member proved when it became Ready
	// (ProveWarm) is not asked again while its pod and container are the
	// ones proved. Either way, the connection the identity was asked over
	// is the claim's heartbeat's (runner.Client.Keep): no pod exec is
	// opened for it at or after the grant.
	type answer struct {
		id  *runner.Identity
		err error
		p   *runner.Pinger // the connection it was asked over
	}
	ask := func(pod string) (*runner.Client, chan answer) {
		b.pathProofs.Add(1)
		rc := runner.NewClient(b.dialer(pod))
		p := rc.Pinger()
		ch := make(chan answer, 1)
		go func() {
			id, err := p.Identity(ctx)
			ch <- answer{id, err, p}
		}()
		return rc, ch
	}
	var (
		rc       *runner.Client
		identity chan answer
		a        answer
	)
	defer func() { // a connection not handed over
		if a.p != nil {
			_ = a.p.Close()
		}
	}()
	if _, proved := b.warm.get(name); !proved {
		rc, identity = ask(name)
	}
	wait := func() {
		if identity != nil {
			if a := <-identity; a.p != nil {
				_ = a.p.Close()
			}
		}
	}
	// the pod agent-sandbox names after its Sandbox, read from the moment
	// the claim named it
	pods.start(name)
	sb, err := b.adopted(ctx, c, name)
	if err != nil {
		wait()
		return nil, fmt.Errorf("kube: Sandbox %s/%s of claim %s: %w", b.namespace, name, c.GetName(), err)
	}
	podName := sb.GetAnnotations()[annotationPodName]
	if podName == "" {
		podName = name
	}
	if podName != name && identity != nil {
		wait()
		rc, identity = ask(podName)
	}
	check := func(pod *unstructured.Unstructured) error {
		if err := checkImages(pod, spec.TemplateID); err != nil {
			return err
		}
		return checkNetwork(pod, spec)
	}
	pod, err := pods.get(podName)
	if err != nil || check(pod) != nil || !samePodIPs(c, sb, pod) {
		pod, err = pods.fresh(podName)
	}
	if err == nil {
		err = check(pod)
	}
	var pl *sandbox.Placement
	if err == nil {
		pl, err = b.placement(ctx, sb, pod, created)
	}
	var kept *keptConn // the proof's connection, when the member's proof is taken
	switch {
	case identity != nil:
		a = <-identity
	case err != nil:
	default:
		if id, ok := b.provenFor(pod); ok {
			rc, a = runner.NewClient(b.dialer(podName)), answer{id: id}
			kept = b.warm.claimed(podName)
		} else { // re-created or restarted since it was proved
			var ch chan answer
			rc, ch = ask(podName)
			a = <-ch
		}
	}
	// a claimed member is no longer warm: its proof is not taken again
	b.warm.drop(podName)
	if err != nil {
		if kept != nil {
			kept.close()
		}
		return nil, fmt.Errorf("kube: pod %s/%s of claim %s: %w", b.namespace, podName, c.GetName(), err)
	}
	s := b.sandboxOf(c)
	s.ID, s.State, s.Placement, s.Runner = podName, sandbox.StateRunning, pl, rc
	id, err := a.id, a.err
	if err != nil {
		return nil, fmt.Errorf("kube: runner of pod %s/%s (claim %s): %w", b.namespace, podName, c.GetName(), err)
	}
	if err := identityCheck(id, spec.Generation, podName, spec.Runner.Digest); err != nil {
		if kept != nil {
			kept.close()
		}
		return nil, fmt.Errorf("%w: pod %s/%s (claim %s): %v", sandbox.ErrIdentity, b.namespace, podName, c.GetName(), err)
	}
	// the connection the identity came over is the heartbeat's; a kept
	// one whose exec ended is not (the heartbeat dials, as it would
	// without one)
	switch {
	case a.p != nil:
		rc.Keep(a.p)
		b.handedOver(podName, a.p)
		a.p = nil
	case kept != nil && kept.handOver(rc):
		b.handedOver(podName, kept.p)
	}
	if err := b.followEgress(pod); err != nil {
		return nil, err
	}
	s.RunnerBinarySHA256, s.Ready = id.RunnerBinarySHA256, time.Now()
	s.Network, s.Allow = sandbox.NetworkDeny, nil
	if spec.Network == sandbox.NetworkAllowList {
		s.Network, s.Allow = sandbox.NetworkAllowList, spec.Allow // as checkNetwork read them in the pod
	}
	return s, nil
}

// watchReady watches claim c until it is bound and Ready, and returns it
// as it was then. bound is called with the name of the Sandbox the claim
// is bound to whenever the claim, as seen, names one (Ready or not yet).
func (b *Backend) watchReady(ctx context.Context, c *unstructured.Unstructured, early watch.Interface, bound func(sandbox string)) (*unstructured.Unstructured, error) {
	claims := b.dyn.Resource(claimsGVR).Namespace(b.namespace)
	name := c.GetName()
	if early != nil {
		defer early.Stop()
	}
	for {
		if n := boundName(c); n != "" {
			bound(n)
		}
		if b.readyClaim(c) {
			return c, nil
		}
		if err := b.warmPoolGone(ctx, c); err != nil {
			return c, err
		}
		w, err := early, error(nil)
		if early == nil {
			w, err = claims.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: c.GetResourceVersion()})
		}
		early = nil
		if err == nil {
			c, err = b.untilReady(ctx, w, c, bound)
			w.Stop()
		}
		if ctx.Err() != nil {
			_, reason, msg := readyCondition(c)
			state := "not bound to a sandbox"
			if n := boundName(c); n != "" {
				state = "bound to Sandbox " + n + ", not ready"
			}
			if reason != "" {
				state += fmt.Sprintf(" (Ready: %s: %s)", reason, msg)
			}
			return c, fmt.Errorf("%w: SandboxClaim %s/%s on warm pool %s: %s in time; deleted", ErrNotReady, b.namespace, name,
				warmPoolOf(c), state)
		}
		if err != nil && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			time.Sleep(100 * time.Millisecond) // a broken watch: read it again
		}
		fresh, gerr := claims.Get(ctx, name, metav1.GetOptions{})
		if gerr == nil {
			c = fresh
		} else if apierrors.IsNotFound(gerr) {
			return c, fmt.Errorf("kube: SandboxClaim %s/%s was deleted while it was awaited", b.namespace, name)
		}
	}
}

// untilReady reads w until the claim is bound and Ready (nil error), the
// watch ends (nil error, the claim as last seen) or fails; bound as in
// watchReady.
func (b *Backend) untilReady(ctx context.Context, w watch.Interface, c *unstructured.Unstructured, bound func(string)) (*unstructured.Unstructured, error) {
	for {
		sandboxes := b.seen.changes()
		if b.readyClaim(c) {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-sandboxes:
		case ev, ok := <-w.ResultChan():
			if !ok {
				return c, nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if u, ok := ev.Object.(*unstructured.Unstructured); ok && u.GetUID() == c.GetUID() {
					c = u
					if n := boundName(c); n != "" {
						bound(n)
					}
					if b.readyClaim(c) {
						return c, nil
					}
					if err := b.warmPoolGone(ctx, c); err != nil {
						return c, err
					}
				}
			case watch.Deleted:
				if u, ok := ev.Object.(*unstructured.Unstructured); ok && u.GetUID() != c.GetUID() {
					continue // another claim of that name: one deleted before this one was made
				}
				return c, fmt.Errorf("kube: SandboxClaim %s/%s was deleted while it was awaited", b.namespace, c.GetName())
			case watch.Error:
				return c, apierrors.FromObject(ev.Object)
			}
		}
	}
}

// readyClaim says whether claim c, as last seen, is bound to a Ready
// sandbox: it says so itself (Ready, naming its Sandbox), or the Sandbox
// it names is, as the backend's watch of Sandboxes saw it (ProveWarm),
// controlled by c and Ready. agent-sandbox adopts a warm member for a
// claim in three writes: the claim's annotation naming it, the Sandbox
// handed to the claim (owner reference and labels), then the claim's
// status, whose Ready condition is the Sandbox's own forwarded (unless
// the claim expired, which a Slipway claim does not, or the pass failed,
// which a claim bound to a Ready Sandbox it controls is not kept back
// by). Taking it from the Sandbox saves the claim's path the third write
// and its event; the pod and identity checks that follow are the same.
func (b *Backend) readyClaim(c *unstructured.Unstructured) bool {
	n := boundName(c)
	if n == "" {
		return false
	}
	if ready, _, _ := readyCondition(c); ready {
		return true
	}
	sb, ok := b.seen.get(n)
	if !ok || !controlledByUID(sb, c.GetUID()) {
		return false
	}
	ready, _, _ := readyCondition(sb)
	return ready
}

// reasonNoWarmPool is the reason of a claim's Ready condition while
// agent-sandbox's controller finds no SandboxWarmPool of its warmPoolRef
// (it keeps trying: the pool may be on its way).
const reasonNoWarmPool = "WarmPoolNotFound"

// warmPoolGone is sandbox.ErrGenerationGone when claim c's controller says
// its warm pool is not there and the API server says so too (the
// controller's cache may lag a pool just made): its generation was drained
// (or never applied), so waiting out the claim's deadline would gain
// nothing. Nil otherwise.
func (b *Backend) warmPoolGone(ctx context.Context, c *unstructured.Unstructured) error {
	if _, reason, _ := readyCondition(c); reason != reasonNoWarmPool || boundName(c) != "" {
		return nil
	}
	wp := warmPoolOf(c)
	_, err := b.dyn.Resource(warmPoolsGVR).Namespace(b.namespace).Get(ctx, wp, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("%w: SandboxClaim %s/%s: its SandboxWarmPool %s is not in the namespace (its generation was drained, or never applied); deleted",
		sandbox.ErrGenerationGone, b.namespace, c.GetName(), wp)
}

func warmPoolOf(c *unstructured.Unstructured) string {
	n, _, _ := unstructured.NestedString(c.Object, "spec", "warmPoolRef", "name")
	return n
}

// checkImages checks that every container of pod runs the image its spec
// pins by digest (status imageID), and the workspace container the
// template's digest templateID ("" skips that).
func checkImages(pod *unstructured.Unstructured, templateID string) error {
	for _, kind := range []string{"initContainers", "containers"} {
		specs, _, _ := unstructured.NestedSlice(pod.Object, "spec", kind)
		statuses, _, _ := unstructured.NestedSlice(pod.Object, "status", strings.TrimSuffix(kind, "s")+"Statuses")
		for _, cs := range specs {
			m, _ := cs.(map[string]any)
			cname, _ := m["name"].(string)
			image, _ := m["image"].(string)
			_, want, ok := strings.Cut(image, "@")
			if !ok {
				return fmt.Errorf("%w: pod %s: container %s runs %s, not an image by digest", sandbox.ErrIdentity, pod.GetName(), cname, image)
			}
			if cname == kubeobjects.WorkspaceContainer && templateID != "" && want != templateID {
				return fmt.Errorf("%w: pod %s: the workspace container's image is %s, the generation pins %s", sandbox.ErrIdentity, pod.GetName(), want, templateID)
			}
			var got string
			for _, st := range statuses {
				sm, _ := st.(map[string]any)
				if sm["name"] == cname {
					got, _ = sm["imageID"].(string)
				}
			}
			if _, d, ok := strings.Cut(got, "@"); ok {
				got = d
			}
			if got != want {
				return fmt.Errorf("%w: pod %s: container %s runs image %q, its spec pins %s", sandbox.ErrIdentity, pod.GetName(), cname, got, want)
			}
		}
	}
	return nil
}

// checkNetwork checks that pod was made for the network spec asks for:
// an allow-list's pod runs render's egress proxy container with that very
// list, a deny pod none. A pod of a template rendered for the pool's
// earlier network (its warm members outlive a re-render) is refused.
func checkNetwork(pod *unstructured.Unstructured, spec sandbox.Spec) error {
	var (
		has   bool
		allow string
	)
	cs, _, _ := unstructured.NestedSlice(pod.Object, "spec", "containers")
	for _, c := range cs {
		m, _ := c.(map[string]any)
		if m["name"] != kubeobjects.EgressContainer {
			continue
		}
		has = true
		argv, _, _ := unstructured.NestedStringSlice(m, "command")
		for i, a := range argv {
			if a == "--allow" && i+1 < len(argv) {
				allow = argv[i+1]
			}
		}
	}
	want := spec.Network == sandbox.NetworkAllowList
	switch {
	case has && !want:
		return fmt.Errorf("%w: pod %s runs an egress proxy (allow %q), the pool's network is deny", sandbox.ErrIdentity, pod.GetName(), allow)
	case !has && want:
		return fmt.Errorf("%w: pod %s runs no egress proxy, the pool's network is an allow-list", sandbox.ErrIdentity, pod.GetName())
	case has && allow != strings.Join(spec.Allow, ","):
		return fmt.Errorf("%w: pod %s's egress proxy allows %q, the pool's list is %q", sandbox.ErrIdentity, pod.GetName(), allow, strings.Join(spec.Allow, ","))
	}
	return nil
}

// nodeInfo is what placement needs of a node.
type nodeInfo struct {
	created time.Time
	labels  map[string]string
	os      string
}

// placement is where a claim's sandbox runs: its node, the node's image
// (the value of the label the pod selects its node by, render's node-image
// pin, or else the node's OS image, its spaces made '_'), runtime class and launch type
// (agent-sandbox's launch-type label; a cold start on a node younger than
// the claim is a new node).
func (b *Backend) placement(ctx context.Context, sb, pod *unstructured.Unstructured, claimed time.Time) (*sandbox.Placement, error) {
	nodeName, _, _ := unstructured.NestedString(pod.Object, "spec", "nodeName")
	rc, _, _ := unstructured.NestedString(pod.Object, "spec", "runtimeClassName")
	pl := &sandbox.Placement{Cluster: b.o.cluster, Namespace: b.namespace, NodeID: nodeName, RuntimeClass: rc, LaunchType: sandbox.LaunchCold}
	b.mu.Lock()
	n, ok := b.nodes[nodeName]
	b.mu.Unlock()
	if !ok && nodeName != "" {
		u, err := b.dyn.Resource(nodesGVR).Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("kube: node %s: %w", nodeName, err)
		}
		osImage, _, _ := unstructured.NestedString(u.Object, "status", "nodeInfo", "osImage")
		// A manifest's ids hold no white space: "Debian GNU/Linux 13
		// (trixie)" is recorded as Debian_GNU/Linux_13_(trixie).
		n = nodeInfo{created: u.GetCreationTimestamp().Time, labels: u.GetLabels(), os: strings.Join(strings.Fields(osImage), "_")}
		b.mu.Lock()
		b.nodes[nodeName] = n
		b.mu.Unlock()
	}
	pl.NodeImageID = n.os
	if sel, _, _ := unstructured.NestedStringMap(pod.Object, "spec", "nodeSelector"); len(sel) == 1 {
		for k := range sel {
			if v := n.labels[k]; v != "" {
				pl.NodeImageID = v
			}
		}
	}
	switch sb.GetLabels()[labelLaunchType] {
	case "warm":
		pl.LaunchType = sandbox.LaunchWarm
	default:
		if n.created.After(claimed) {
			pl.LaunchType = sandbox.LaunchNewNode
		}
	}
	return pl, nil
}

// Delete releases sandbox id: its SandboxClaim is deleted, and the Sandbox
// and pod the claim got (without waiting for the cluster's garbage
// collector), and Delete returns once the API server has none of the three
// any more. id may also be the name of a claim not bound yet. A sandbox
// that does not exist (any more) is no error.
func (b *Backend) Delete(ctx context.Context, id string) error {
	name, err := b.claimOf(ctx, id)
	if err != nil {
		return err
	}
	if name == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.o.deleteTimeout)
	defer cancel()
	if err := b.deleteClaim(ctx, name, ""); err != nil {
		return err
	}
	b.stopEgress(id)
	return nil
}

// claimOf is the name of the claim of sandbox id ("" when there is none).
func (b *Backend) claimOf(ctx context.Context, id string) (string, error) {
	b.mu.Lock()
	name, ok := b.claims[id]
	b.mu.Unlock()
	if ok {
		return name, nil
	}
	all, err := b.List(ctx, sandbox.Filter{})
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range all {
		if s.ID == id {
			return b.claims[id], nil
		}
	}
	return "", nil
}

// deleteClaim deletes claim name (of uid, when given), the Sandbox it is
// bound to and that Sandbox's pod, and waits until all three are gone.
func (b *Backend) deleteClaim(ctx context.Context, name string, uid types.UID) error {
	return b.deleteClaimAt(ctx, name, uid, "", "", false, nil)
}

// deleteClaimAt is deleteClaim on the precondition that the claim's
// resourceVersion is rv (when given: sandbox.ErrOwnerConflict when it
// changed; its uid and the Sandbox it is bound to, bound, are then as
// read with it, and the claim is not read again: listed is then the claim
// as listed, when known), its pod deleted at once when force. A claim
// bound to a Sandbox it controls is reported to the release observer once
// all are gone.
func (b *Backend) deleteClaimAt(ctx context.Context, name string, uid types.UID, rv, bound string, force bool, listed *sandbox.Object) error {
	claims := b.dyn.Resource(claimsGVR).Namespace(b.namespace)
	claim := listed
	if rv == "" || uid == "" {
		c, err := claims.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("kube: SandboxClaim %s/%s: %w", b.namespace, name, err)
		}
		if uid == "" {
			uid = c.GetUID()
		}
		bound = boundName(c)
		co := b.claimObjectOf(c)
		claim = &co
	}
	background := metav1.DeletePropagationBackground
	pre := &metav1.Preconditions{UID: &uid}
	if rv != "" {
		pre.ResourceVersion = &rv
	}
	err := claims.Delete(ctx, name, metav1.DeleteOptions{Preconditions: pre, PropagationPolicy: &background})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("%w: kube: SandboxClaim %s/%s changed since it was read (resourceVersion %s): %v", sandbox.ErrOwnerConflict, b.namespace, name, rv, err)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kube: delete SandboxClaim %s/%s: %w", b.namespace, name, err)
	}
	type ref struct {
		res  string
		gvr  schemaGVR
		name string
		uid  types.UID
	}
	gone := []ref{{"SandboxClaim", claimsGVR, name, uid}}
	var held *sandbox.Object // the Sandbox the claim held
	if sbName := bound; sbName != "" {
		sandboxes := b.dyn.Resource(sandboxesGVR).Namespace(b.namespace)
		sb, err := sandboxes.Get(ctx, sbName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("kube: Sandbox %s/%s: %w", b.namespace, sbName, err)
		case controlledByUID(sb, uid):
			podName := sb.GetAnnotations()[annotationPodName]
			if podName == "" {
				podName = sbName
			}
			sbUID := sb.GetUID()
			if claim != nil {
				so := sandboxObjectOf(sb, *claim)
				held = &so
			}
			if err := sandboxes.Delete(ctx, sbName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &sbUID}, PropagationPolicy: &background}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("kube: delete Sandbox %s/%s: %w", b.namespace, sbName, err)
			}
			pods := b.dyn.Resource(podsGVR).Namespace(b.namespace)
			var podUID types.UID
			if pod, err := pods.Get(ctx, podName, metav1.GetOptions{}); err == nil && metav1.IsControlledBy(pod, sb) {
				podUID = pod.GetUID()
				opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &podUID}}
				if force {
					opts.GracePeriodSeconds = new(int64)
				}
				if err := pods.Delete(ctx, podName, opts); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("kube: delete pod %s/%s: %w", b.namespace, podName, err)
				}
			}
			gone = append(gone, ref{"Sandbox", sandboxesGVR, sbName, sbUID}, ref{"pod", podsGVR, podName, podUID})
			b.closeHanded(podName)
			b.mu.Lock()
			delete(b.claims, podName)
			delete(b.claims, sbName)
			b.mu.Unlock()
		}
	}
	b.mu.Lock()
	delete(b.claims, name)
	b.mu.Unlock()
	// until all are gone, the three at once
	errs := make([]error, len(gone))
	var wg sync.WaitGroup
	for i, r := range gone {
		wg.Go(func() { errs[i] = b.untilGone(ctx, r.res, r.gvr, r.name, r.uid) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	b.release(claim, held)
	return nil
}

// controlledByUID says whether u's controller has uid.
func controlledByUID(u *unstructured.Unstructured, uid types.UID) bool {
	ref := metav1.GetControllerOf(u)
	return ref != nil && ref.UID == uid
}

// untilGone returns once the object of gvr called name (of uid, when
// given: another of that name is not it) is gone, or an error naming what
// holds it (its finalizers) when ctx ends first.
func (b *Backend) untilGone(ctx context.Context, kind string, gvr schemaGVR, name string, uid types.UID) error {
	res := b.dyn.Resource(gvr).Namespace(b.namespace)
	for {
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && uid != "" && u.GetUID() != uid) {
			return nil
		}
		select {
		case <-ctx.Done():
			why := ""
			gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			u, err := res.Get(gctx, name, metav1.GetOptions{})
			cancel()
			if err == nil && len(u.GetFinalizers()) > 0 {
				why = fmt.Sprintf(" (finalizers %v)", u.GetFinalizers())
			}
			return fmt.Errorf("kube: %s %s/%s still there after its deletion%s: %w", kind, b.namespace, name, why, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// earlyWatch is a watch of one claim, opened beside its Create instead
// of after it: the claim's Create and the watch that follows it to Ready
// are two round trips to the API server, and this way the grant waits
// for one. Opened before the claim exists, with no resource version, it
// sees the claim's ADDED and every change after; opened after, it starts
// with the claim as it is then. Either way nothing is missed.
type earlyWatch struct {
	ch    chan watch.Interface
	taken bool
}

// watchBeside opens a watch of claim name in the background.
func (b *Backend) watchBeside(ctx context.Context, name string) *earlyWatch {
	e := &earlyWatch{ch: make(chan watch.Interface, 1)}
	go func() {
		w, err := b.dyn.Resource(claimsGVR).Namespace(b.namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			w = nil // await opens its own
		}
		e.ch <- w
	}()
	return e
}

// take is the watch, once opened (nil when it failed); the caller stops
// it. After stop, nil.
func (e *earlyWatch) take() watch.Interface {
	if e.taken {
		return nil
	}
	e.taken = true
	return <-e.ch
}

// stop stops the watch unless it was taken.
func (e *earlyWatch) stop() {
	if e.taken {
		return
	}
	e.taken = true
	go func() {
		if w := <-e.ch; w != nil {
			w.Stop()
		}
	}()
}
