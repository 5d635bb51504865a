package kubesandbox

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// A warm member's runner is proved once, when the member is Ready (a pod
// exec, the slowest step of a claim), instead of on the claim's path: a
// claim bound to a member whose pod and workspace container are still the
// ones proved (the same pod UID and container ID: not re-created, not
// restarted) takes that proof, checked against the claim's spec exactly
// as a fresh one is (claim.go, await). A member not proved yet, or
// changed since, is proved on the claim's path as before. Nobody else
// executes in an unclaimed member, so nothing it runs differs between the
// proof and the claim.

// warmProof is what a warm member's runner proved, and of which pod and
// container.
type warmProof struct {
	podUID, containerID string
	id                  runner.Identity
	kept                *keptConn // the proof's connection, open; nil when none
}

// provenWarm holds the proofs of warm members by pod name.
type provenWarm struct {
	mu     sync.Mutex
	byName map[string]warmProof
}

func (p *provenWarm) get(pod string) (warmProof, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.byName[pod]
	return w, ok
}

func (p *provenWarm) put(pod string, w warmProof) {
	p.mu.Lock()
	old := p.byName[pod].kept
	p.byName[pod] = w
	p.mu.Unlock()
	if old != nil && old != w.kept {
		old.close()
	}
}

// drop forgets pod's proof and closes its kept connection.
func (p *provenWarm) drop(pod string) {
	p.mu.Lock()
	k := p.byName[pod].kept
	delete(p.byName, pod)
	p.mu.Unlock()
	if k != nil {
		k.close()
	}
}

// claimed forgets pod's proof (its member is claimed) and returns its
// kept connection, if any, not closed: for the claim.
func (p *provenWarm) claimed(pod string) *keptConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := p.byName[pod].kept
	delete(p.byName, pod)
	return k
}

// dropKept closes k and forgets it as pod's kept connection, if it still
// is; the proof stays.
func (p *provenWarm) dropKept(pod string, k *keptConn) {
	p.mu.Lock()
	if w, ok := p.byName[pod]; ok && w.kept == k {
		w.kept = nil
		p.byName[pod] = w
	}
	p.mu.Unlock()
	k.close()
}

// keptAll is the kept connections by pod.
func (p *provenWarm) keptAll() map[string]*keptConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := map[string]*keptConn{}
	for pod, w := range p.byName {
		if w.kept != nil {
			m[pod] = w.kept
		}
	}
	return m
}

// closeKept closes every kept connection; the proofs stay.
func (p *provenWarm) closeKept() {
	for pod, k := range p.keptAll() {
		p.dropKept(pod, k)
	}
}

// workspaceContainerID is the container ID pod's status gives its
// workspace container while it runs ("" when it does not).
func workspaceContainerID(pod *unstructured.Unstructured) string {
	sts, _, _ := unstructured.NestedSlice(pod.Object, "status", "containerStatuses")
	for _, s := range sts {
		m, _ := s.(map[string]any)
		if m["name"] != kubeobjects.WorkspaceContainer {
			continue
		}
		if _, running, _ := unstructured.NestedMap(m, "state", "running"); !running {
			return ""
		}
		id, _ := m["containerID"].(string)
		return id
	}
	return ""
}

// ProvedWarm is how many warm members' runners are proved now (ProveWarm),
// not claimed yet.
func (b *Backend) ProvedWarm() int {
	b.warm.mu.Lock()
	defer b.warm.mu.Unlock()
	return len(b.warm.byName)
}

// provenFor is the proof of pod taken while it was the same pod with the
// same workspace container, if there is one.
func (b *Backend) provenFor(pod *unstructured.Unstructured) (*runner.Identity, bool) {
	w, ok := b.warm.get(pod.GetName())
	if !ok || w.podUID != string(pod.GetUID()) || w.containerID == "" || w.containerID != workspaceContainerID(pod) {
		return nil, false
	}
	id := w.id
	return &id, true
}

// A warm member's proof is a pod exec: a process started in its
// container through the API server, the kubelet and the container
// runtime, the same node's parts that bind and start claims. A burst of
// claims makes as many replacement members, which become Ready while the
// burst goes on; proving them at once would put their execs beside the
// burst's claims on the node. So a proof waits until this backend has
// awaited no claim for proofQuiet, or for proofMaxDefer at most (under
// claims that never pause). Claims take the oldest warm member first
// (agent-sandbox's queue), so a member made during a burst is seldom
// claimed before its proof; one that is is proved on its claim's path.
const (
	proofQuiet    = 250 * time.Millisecond
	proofMaxDefer = 5 * time.Second
	proofPoll     = 50 * time.Millisecond
)

// yieldToClaims returns once claims have been quiet for proofQuiet, after
// proofMaxDefer, or when ctx ends.
func (b *Backend) yieldToClaims(ctx context.Context) {
	deadline := time.Now().Add(proofMaxDefer)
	for ctx.Err() == nil && !b.claimsQuiet(proofQuiet) && time.Now().Before(deadline) {
		sleep(ctx, proofPoll)
	}
}

// ProveWarm proves the runner of each warm member of the namespace once it
// is Ready (a pool's SandboxWarmPool controls it), until ctx ends, so that
// a claim bound to it need not (see provenFor). It watches the Sandboxes;
// a watch that ends is started again, after a list of them all (at least
// every minute). At most four proofs run at once, each once claims pause
// (yieldToClaims). Meanwhile the backend keeps the namespace's Sandboxes
// and pods as its watches see them, for claims (adopted, readPods).
func (b *Backend) ProveWarm(ctx context.Context) {
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		b.warm.closeKept() // none is put after the proofs under way ended
	}()
	proving := map[string]bool{} // by Sandbox name; this goroutine's own
	var mu sync.Mutex
	consider := func(sb *unstructured.Unstructured) {
		ref := metav1.GetControllerOf(sb)
		if ref == nil || ref.Kind != "SandboxWarmPool" {
			return
		}
		if ready, _, _ := readyCondition(sb); !ready {
			return
		}
		podName := sb.GetAnnotations()[annotationPodName]
		if podName == "" {
			podName = sb.GetName()
		}
		mu.Lock()
		if proving[podName] {
			mu.Unlock()
			return
		}
		proving[podName] = true
		mu.Unlock()
		wg.Go(func() {
			defer func() { mu.Lock(); delete(proving, podName); mu.Unlock() }()
			b.yieldToClaims(ctx)
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			b.proveMember(ctx, podName)
		})
	}
	wg.Go(func() { b.keepAlive(ctx) })
	wg.Go(func() { b.pods.follow(ctx, b.dyn.Resource(podsGVR).Namespace(b.namespace), nil) })
	// the watch ends every minute: the list that follows considers again
	// the members a proof missed
	b.seen.follow(ctx, b.dyn.Resource(sandboxesGVR).Namespace(b.namespace), func(t watch.EventType, sb *unstructured.Unstructured) {
		if t == watch.Deleted {
			name := sb.GetAnnotations()[annotationPodName]
			if name == "" {
				name = sb.GetName()
			}
			b.warm.drop(name)
			return
		}
		b.forgetForeign(sb)
		consider(sb)
	})
}

// forgetForeign drops the proof, and closes the kept connection, of
// Sandbox sb's pod once a claim this backend does not await controls it
// (another replica's, a bare one): it is no warm member any more, and no
// claim of this backend will take it.
func (b *Backend) forgetForeign(sb *unstructured.Unstructured) {
	ref := metav1.GetControllerOf(sb)
	if ref == nil || ref.Kind != "SandboxClaim" || b.awaited(ref.Name) {
		return
	}
	pod := sb.GetAnnotations()[annotationPodName]
	if pod == "" {
		pod = sb.GetName()
	}
	b.warm.drop(pod)
}

// proveMember asks the runner of warm member pod podName for its identity
// unless it was proved for this very pod and container, and keeps it with
// the connection it was asked over, open (kept.go).
func (b *Backend) proveMember(ctx context.Context, podName string) {
	// the pod as the pod watch holds it when its workspace container runs
	// there; else as the API server has it (the watch may lag)
	pod, ok := b.pods.get(podName)
	if !ok || workspaceContainerID(pod) == "" {
		var err error
		if pod, err = b.dyn.Resource(podsGVR).Namespace(b.namespace).Get(ctx, podName, metav1.GetOptions{}); err != nil {
			return
		}
	}
	cid := workspaceContainerID(pod)
	if cid == "" {
		return
	}
	if _, ok := b.provenFor(pod); ok {
		return
	}
	// an exec that fails (a busy node) is tried again a few times; a
	// member never proved here is proved on its claim's path, which says
	// why it cannot be
	for try := 0; try < 5 && ctx.Err() == nil; try++ {
		if try > 0 {
			sleep(ctx, time.Duration(try)*500*time.Millisecond)
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		p, exec := dialKept(b.dialer(podName))
		id, err := p.Identity(pctx)
		cancel()
		if err != nil || id == nil {
			_ = p.Close()
			continue
		}
		w := warmProof{podUID: string(pod.GetUID()), containerID: cid, id: *id}
		if e := exec.Load(); e != nil && ctx.Err() == nil {
			w.kept = newKept(p, e)
			go b.watchKept(podName, w.kept)
		} else {
			_ = p.Close()
		}
		b.warm.put(podName, w)
		return
	}
}

// identityCheck says what of id differs from what a claim of spec on pod
// podName expects (none: nil).
func identityCheck(id *runner.Identity, generation, podName, runnerDigest string) error {
	var why []string
	if id.Generation != generation {
		why = append(why, fmt.Sprintf("generation %q, want %s", id.Generation, generation))
	}
	if id.SandboxID != podName {
		why = append(why, fmt.Sprintf("sandbox %q, want %s", id.SandboxID, podName))
	}
	if runnerDigest != "" && id.RunnerBinarySHA256 != runnerDigest {
		why = append(why, fmt.Sprintf("binary %s, the pinned runner image records %s", id.RunnerBinarySHA256, runnerDigest))
	}
	if len(why) > 0 {
		return fmt.Errorf("%s", strings.Join(why, "; "))
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
