package kubefleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"k8s.io/client-go/rest"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/cluster/kubeapply"
	"github.com/slipway-dev/slipway/pkg/cluster/kubefleet"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/kubeconfig"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
)

// A rollout driven on a cluster: the fleet applies the render of the
// branch head at each step and reads the cluster back. (It needs a
// cluster, so it is compiled, not run; TestRolloutOnNode runs it.)
func Example() {
	ctx := context.Background()
	cfg, ns, err := kubeconfig.Load("kubeconfig")
	if err != nil {
		fmt.Println(err)
		return
	}
	applierRepo, _ := gitops.Open(ctx, "config.git")
	a, _ := kubeapply.New(cfg, kubeapply.WithNamespace(ns))
	ra, _ := kubefleet.NewRenderApplier(applierRepo, "main", "agents", a)
	var prover kubefleet.Prover // the runtime on the Kubernetes sandbox backend
	fleet, err := kubefleet.New(cfg, "agents", ns, kubefleet.WithApplier(ra), kubefleet.WithProver(prover))
	if err != nil {
		fmt.Println(err)
		return
	}
	driverRepo, _ := gitops.Open(ctx, "config.git")
	d := &rollout.Driver{Repo: driverRepo, Pool: "agents", Fleet: fleet, UnsignedEvidence: true}
	r, err := d.Start(ctx, "g-…", false)
	if err == nil {
		r, err = d.Drive(ctx, r.ID)
	}
	fmt.Println(r, err)
}

// listServer answers the list requests a Fleet makes in namespace sandboxes
// with the objects in items (by resource), as an API server would.
type listServer struct {
	mu    sync.Mutex
	items map[string][]map[string]any
}

func (c *listServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if r.Method != http.MethodGet || len(parts) < 4 || parts[len(parts)-3] != "namespaces" {
		http.NotFound(w, r)
		return
	}
	resource := parts[len(parts)-1]
	c.mu.Lock()
	items := c.items[resource]
	c.mu.Unlock()
	if items == nil {
		items = []map[string]any{}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}, "items": items})
}

// labelled is an object of pool agents carrying a config revision.
func labelled(apiVersion, kind, name, revision string) map[string]any {
	return map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{
		"name": name, "namespace": "sandboxes", "uid": "uid-" + name,
		"labels":      map[string]any{kubeobjects.LabelPool: "agents"},
		"annotations": map[string]any{kubeobjects.AnnotationConfigRevision: revision}}}
}

// reports is an Applier that reports the revision it applied.
type reports string

func (a reports) Sync(context.Context) (string, error) { return string(a), nil }

// Sync counts a step as done only when every template and warm pool of the
// pool carries the revision the applier reports: while the cluster still
// holds a warm pool of the previous revision it fails with ErrNotSynced,
// naming what carries which revision.
func ExampleFleet_Sync() {
	const prev, head = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	c := &listServer{items: map[string][]map[string]any{
		"sandboxtemplates": {labelled(kubeobjects.ExtensionsAPIVersion, "SandboxTemplate", "agents-g2", head)},
		"sandboxwarmpools": {labelled(kubeobjects.ExtensionsAPIVersion, kubeobjects.KindSandboxWarmPool, "agents-g2", prev)},
	}}
	srv := httptest.NewServer(c)
	defer srv.Close()
	f, err := kubefleet.New(&rest.Config{Host: srv.URL}, "agents", "sandboxes", kubefleet.WithApplier(reports(head)))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	_, err = f.Sync(ctx)
	fmt.Println("not synced:", errors.Is(err, kubefleet.ErrNotSynced))
	fmt.Println(err)

	c.mu.Lock()
	c.items["sandboxwarmpools"] = []map[string]any{labelled(kubeobjects.ExtensionsAPIVersion, kubeobjects.KindSandboxWarmPool, "agents-g2", head)}
	c.mu.Unlock()
	rev, err := f.Sync(ctx)
	fmt.Println("synced at head:", rev == head, err)
	// Output:
	// not synced: true
	// kubefleet: not synced: the objects of pool agents carry different config revisions: 111111111111 on SandboxWarmPool/agents-g2; 222222222222 on SandboxTemplate/agents-g2
	// synced at head: true <nil>
}
