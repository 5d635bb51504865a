package kubesandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/execution/egress"
)

// egressDrainTimeout bounds how long Delete waits, once the pod is gone,
// for the rest of its egress proxy's log.
const egressDrainTimeout = 15 * time.Second

// WithEgressRecorder passes every attempt of an allow-list sandbox's
// egress proxy (render's kubeobjects.EgressContainer, which logs each as a
// JSON line) to record, with the sandbox's id: Create follows the
// container's log through the API server from the claim on, and Delete
// returns once the log of the deleted pod has ended (or
// egressDrainTimeout after the pod is gone). record is called from the
// follower's goroutine. Without it, the attempts stay in the container's
// log only. A sandbox taken up by List after a restart is not followed.
func WithEgressRecorder(record func(sandboxID string, a egress.Attempt)) Option {
	return func(o *options) error {
		o.egressRecord = record
		return nil
	}
}

// follower is the egress log follower of one sandbox.
type follower struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// followEgress follows the egress proxy log of pod, when the backend
// records attempts and the pod has a proxy. The whole log: a pod is
// claimed once, and a warm member runs nothing before its claim.
func (b *Backend) followEgress(pod *unstructured.Unstructured) error {
	if b.o.egressRecord == nil || !hasContainer(pod, kubeobjects.EgressContainer) {
		return nil
	}
	hc, err := rest.HTTPClientFor(b.cfg)
	if err != nil {
		return fmt.Errorf("kube: egress log of pod %s/%s: %w", b.namespace, pod.GetName(), err)
	}
	u, err := url.Parse(strings.TrimSuffix(b.cfg.Host, "/"))
	if err != nil || u.Host == "" {
		return fmt.Errorf("kube: API server address %q: %v", b.cfg.Host, err)
	}
	if u.Scheme == "" {
		u.Scheme = "https"
	}
	id := pod.GetName()
	u.Path += "/api/v1/namespaces/" + url.PathEscape(b.namespace) + "/pods/" + url.PathEscape(id) + "/log"
	u.RawQuery = url.Values{"container": {kubeobjects.EgressContainer}, "follow": {"true"}}.Encode()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		cancel()
		return err
	}
	resp, err := hc.Do(req)
	if err == nil && resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		err = fmt.Errorf("%s", resp.Status)
	}
	if err != nil {
		cancel()
		return fmt.Errorf("kube: follow the egress log of pod %s/%s: %w", b.namespace, id, err)
	}
	f := &follower{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var a egress.Attempt
			if json.Unmarshal(sc.Bytes(), &a) != nil || a.Destination == "" {
				continue // not an attempt
			}
			b.o.egressRecord(id, a)
		}
	}()
	b.mu.Lock()
	b.followers[id] = f
	b.mu.Unlock()
	return nil
}

// stopEgress waits, up to egressDrainTimeout, until sandbox id's log
// follower has read the whole log of its (deleted) pod, then stops it.
func (b *Backend) stopEgress(id string) {
	b.mu.Lock()
	f := b.followers[id]
	delete(b.followers, id)
	b.mu.Unlock()
	if f == nil {
		return
	}
	select {
	case <-f.done:
	case <-time.After(egressDrainTimeout):
	}
	f.cancel()
	<-f.done
}

// hasContainer reports whether pod's spec has a container named name.
func hasContainer(pod *unstructured.Unstructured, name string) bool {
	cs, _, _ := unstructured.NestedSlice(pod.Object, "spec", "containers")
	for _, c := range cs {
		if m, _ := c.(map[string]any); m["name"] == name {
			return true
		}
	}
	return false
}
