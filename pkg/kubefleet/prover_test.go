package kubefleet_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/slipway-dev/slipway/pkg/generation"
	"github.com/slipway-dev/slipway/pkg/kubefleet"
	"github.com/slipway-dev/slipway/pkg/render"
	"github.com/slipway-dev/slipway/pkg/runtime"
)

// claimProver runs the proof checks a test can run without the runner's
// exec (the runtime on the Kubernetes backend runs the rest): allocate (a
// proof claim labelled slipway.dev/proof=true binds a ready warm member of
// the generation, and the fleet does not count it as traffic), identity
// (the member's pod runs the generation's template and runner images, by
// the digests pinned, as the kubelet reports the images it ran) and
// cleanup (the claim, its sandbox and pod are deleted and observed gone).
// Any other check is reported as not run: the rollout must not pass on it.
type claimProver struct {
	w *world
	// after runs once the checks ran (a test's hook for a fault).
	after func()
	n     int
}

func (p *claimProver) Prove(ctx context.Context, poolName string, req runtime.ProofRequest) (*runtime.ProofResult, error) {
	w := p.w
	var g *generation.Generation
	for _, x := range w.gens {
		if x.ID == req.Generation {
			g = x
		}
	}
	if g == nil {
		return nil, fmt.Errorf("no generation %s", req.Generation)
	}
	p.n++
	name := fmt.Sprintf("proof-%s-%d", strings.TrimPrefix(req.Rollout, "ro-"), p.n)
	res := &runtime.ProofResult{Pool: poolName, Generation: g.ID, Rollout: req.Rollout}
	add := func(check string, start time.Time, err error) bool {
		e := runtime.Evidence{Check: check, Passed: err == nil, Reason: "ok", Generation: g.ID, SandboxID: res.SandboxID, Started: start.UTC(), Finished: time.Now().UTC(), By: "kubefleet test prover"}
		if err != nil {
			e.Reason = err.Error()
		}
		res.Evidence = append(res.Evidence, e)
		return err == nil
	}
	start := time.Now()
	claims := w.dyn.Resource(kubefleet.SandboxClaims).Namespace(w.ns)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": render.ExtensionsAPIVersion, "kind": "SandboxClaim",
		"metadata": map[string]any{"name": name, "namespace": w.ns, "labels": map[string]any{kubefleet.LabelProof: "true"}},
		"spec":     map[string]any{"warmPoolRef": map[string]any{"name": render.ObjectName(poolName, g.ID)}},
	}}
	if _, err := claims.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	sb, err := bound(ctx, w.dyn, w.ns, name, time.Minute)
	if err == nil {
		res.SandboxID = sb
		var st *runtime.PoolStatus
		if st, err = w.fleet.PoolStatus(ctx, poolName); err == nil {
			if gs := st.Generation(g.ID); gs.Claimed != 0 {
				err = fmt.Errorf("the fleet counts %d open runs on %s during the proof (%v): a proof claim is not traffic", gs.Claimed, g.ID, gs.Runs)
			}
		}
	}
	var pod *unstructured.Unstructured
	if add("allocate", start, err) {
		start = time.Now()
		pod, err = w.dyn.Resource(pods).Namespace(w.ns).Get(ctx, sb, metav1.GetOptions{})
		if err == nil {
			err = identity(pod, g)
		}
		add("identity", start, err)
	}
	start = time.Now()
	err = claims.Delete(ctx, name, metav1.DeleteOptions{})
	if err == nil && res.SandboxID != "" {
		// No garbage collector runs here: the prover deletes what a
		// claim's deletion would take with it.
		if err = w.dyn.Resource(kubefleet.Sandboxes).Namespace(w.ns).Delete(ctx, sb, metav1.DeleteOptions{}); err == nil {
			err = w.dyn.Resource(pods).Namespace(w.ns).Delete(ctx, sb, metav1.DeleteOptions{})
		}
		if err == nil {
			err = gone(ctx, w, name, sb)
		}
	}
	add("cleanup", start, err)
	for _, c := range req.Checks {
		if c != "allocate" && c != "identity" && c != "cleanup" {
			add(c, time.Now(), fmt.Errorf("check %s is not run by the test prover", c))
		}
	}
	if p.after != nil {
		p.after()
		p.after = nil
	}
	return res, nil
}

// identity checks that pod runs g's template and runner images by the
// pinned digests, as the kubelet reports the images it ran.
func identity(pod *unstructured.Unstructured, g *generation.Generation) error {
	want := map[string]string{render.WorkspaceContainer: g.Pins[generation.WorkspaceTemplate].Image, render.RunnerInitContainer: g.Pins[generation.Runner].Image}
	for _, field := range []string{"containerStatuses", "initContainerStatuses"} {
		sts, _, _ := unstructured.NestedSlice(pod.Object, "status", field)
		for _, s := range sts {
			m, _ := s.(map[string]any)
			name, _ := m["name"].(string)
			pin, ok := want[name]
			if !ok {
				continue
			}
			imageID, _ := m["imageID"].(string)
			_, digest, _ := strings.Cut(pin, "@")
			if digest == "" || !strings.HasSuffix(imageID, "@"+digest) {
				return fmt.Errorf("container %s of pod %s ran image %q, the generation pins %s", name, pod.GetName(), imageID, pin)
			}
			delete(want, name)
		}
	}
	if len(want) > 0 {
		return fmt.Errorf("pod %s reports no image for %v", pod.GetName(), want)
	}
	return nil
}

// gone waits until the claim, its sandbox and pod are gone.
func gone(ctx context.Context, w *world, claim, sb string) error {
	end := time.Now().Add(time.Minute)
	for {
		left := 0
		if _, err := w.dyn.Resource(kubefleet.SandboxClaims).Namespace(w.ns).Get(ctx, claim, metav1.GetOptions{}); err == nil {
			left++
		}
		if _, err := w.dyn.Resource(kubefleet.Sandboxes).Namespace(w.ns).Get(ctx, sb, metav1.GetOptions{}); err == nil {
			left++
		}
		if _, err := w.dyn.Resource(pods).Namespace(w.ns).Get(ctx, sb, metav1.GetOptions{}); err == nil {
			left++
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("claim %s, sandbox or pod %s still there after a minute", claim, sb)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
