package kubesandbox

import (
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// What a claim reads of the objects it is bound to, besides its own watch
// (claim.go, await).

// podRead is a read of a pod: the pod or why not.
type podRead struct {
	pod *unstructured.Unstructured
	err error
}

// readPods reads pods of one claim by name, each at most once unless
// asked for a fresh read; start begins a read in the background, get
// waits for it. It is used by one goroutine (await's, and watchReady's
// bound calls on it).
type readPods struct {
	ctx   context.Context
	res   dynamic.ResourceInterface
	reads map[string]chan podRead
	// seen is the pods as the backend's watch of them saw them (nil: none
	// is kept): a pod there is read from it, with no request on the
	// claim's path; await checks it as any other read before the claim
	// was Ready, and reads it again should it fail.
	seen *seenObjects
}

// start begins reading pod name unless a read of it was begun.
func (r *readPods) start(name string) {
	if _, ok := r.reads[name]; ok {
		return
	}
	ch := make(chan podRead, 1)
	r.reads[name] = ch
	if r.seen != nil {
		if p, ok := r.seen.get(name); ok {
			ch <- podRead{pod: p}
			return
		}
	}
	go func() {
		p, err := r.res.Get(r.ctx, name, metav1.GetOptions{})
		ch <- podRead{p, err}
	}()
}

// get is the read of pod name start began (begun now if none was).
func (r *readPods) get(name string) (*unstructured.Unstructured, error) {
	r.start(name)
	pr := <-r.reads[name]
	r.reads[name] <- pr // kept for a later get
	return pr.pod, pr.err
}

// fresh reads pod name now.
func (r *readPods) fresh(name string) (*unstructured.Unstructured, error) {
	return r.res.Get(r.ctx, name, metav1.GetOptions{})
}

// samePodIPs says whether pod has the IPs the Ready claim c mirrors from
// its Sandbox (agent-sandbox's status.sandbox.podIPs), or, when c names
// none (taken as Ready from its Sandbox, readyClaim), the IPs Sandbox sb
// records (status.podIPs); true when neither names any: a pod read before
// the claim was Ready that another pod of the same name replaced since
// has, but for a coincidence, other IPs.
func samePodIPs(c, sb, pod *unstructured.Unstructured) bool {
	want, _, _ := unstructured.NestedStringSlice(c.Object, "status", "sandbox", "podIPs")
	if len(want) == 0 && sb != nil {
		want, _, _ = unstructured.NestedStringSlice(sb.Object, "status", "podIPs")
	}
	if len(want) == 0 {
		return true
	}
	var got []string
	ips, _, _ := unstructured.NestedSlice(pod.Object, "status", "podIPs")
	for _, ip := range ips {
		if m, ok := ip.(map[string]any); ok {
			if s, ok := m["ip"].(string); ok {
				got = append(got, s)
			}
		}
	}
	return slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want)))
}

// adopted is the Sandbox name that claim c is bound to: as the backend's
// watch of Sandboxes (ProveWarm) last saw it when that version is Ready
// and controlled by c (so no older than c's binding: agent-sandbox makes
// c its controller before it marks c Ready), else as read now.
func (b *Backend) adopted(ctx context.Context, c *unstructured.Unstructured, name string) (*unstructured.Unstructured, error) {
	if sb, ok := b.seen.get(name); ok && controlledByUID(sb, c.GetUID()) {
		if ready, _, _ := readyCondition(sb); ready {
			return sb, nil
		}
	}
	return b.dyn.Resource(sandboxesGVR).Namespace(b.namespace).Get(ctx, name, metav1.GetOptions{})
}
