package kubeapply_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/cluster/kubeapply"
	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/pkg/kubeconfig"
)

// Render a checked-out config repository's pool (verified against its
// policies/verification.yaml), apply it to the cluster of a kubeconfig and
// wait for its warm pools. It needs a cluster, so it is compiled, not run;
// the tests run the same flow against a real API server and node.
func Example() {
	ctx := context.Background()
	tree, err := render.OpenDir("config")
	if err != nil {
		log.Fatal(err)
	}
	res, err := render.Pool(ctx, tree, "agents", "0123456789abcdef0123456789abcdef01234567")
	if err != nil {
		log.Fatal(err) // a generation that does not verify renders nothing
	}
	cfg, namespace, err := kubeconfig.Load("kubeconfig")
	if err != nil {
		log.Fatal(err)
	}
	a, err := kubeapply.New(cfg, kubeapply.WithNamespace(namespace))
	if err != nil {
		log.Fatal(err)
	}
	changes, err := a.Apply(ctx, res)
	if err != nil {
		log.Fatal(err) // a conflict names the object, the field and the other manager
	}
	for _, c := range changes.Changes {
		fmt.Println(c) // SandboxTemplate/sandboxes/agents-18dccbf123b1 Created
	}
	if _, err := a.Wait(ctx, changes.WarmPools, 5*time.Minute); err != nil {
		log.Fatal(err)
	}
}

// fakeWarmPools answers what an API server with agent-sandbox's CRDs answers
// for discovery and for two of three warm pools (the third does not
// exist).
func fakeWarmPools() *httptest.Server {
	const group = "extensions.agents.x-k8s.io"
	pools := map[string]string{
		"agents-ready":   `{"spec":{"replicas":2},"status":{"readyReplicas":2}}`,
		"agents-warming": `{"spec":{"replicas":3},"status":{"readyReplicas":1}}`,
	}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch p := r.URL.Path; {
		case p == "/api":
			fmt.Fprint(w, `{"kind":"APIVersions","versions":["v1"]}`)
		case p == "/api/v1":
			fmt.Fprint(w, `{"kind":"APIResourceList","groupVersion":"v1","resources":[]}`)
		case p == "/apis":
			fmt.Fprintf(w, `{"kind":"APIGroupList","groups":[{"name":%q,"versions":[{"groupVersion":"%s/v1beta1","version":"v1beta1"}],"preferredVersion":{"groupVersion":"%s/v1beta1","version":"v1beta1"}}]}`, group, group, group)
		case p == "/apis/"+group+"/v1beta1":
			fmt.Fprintf(w, `{"kind":"APIResourceList","groupVersion":"%s/v1beta1","resources":[{"name":"sandboxwarmpools","singularName":"sandboxwarmpool","namespaced":true,"kind":"SandboxWarmPool","verbs":["get","list","patch"]}]}`, group)
		case strings.HasPrefix(p, "/apis/"+group+"/v1beta1/namespaces/sandboxes/sandboxwarmpools/"):
			name := p[strings.LastIndexByte(p, '/')+1:]
			body, ok := pools[name]
			if !ok {
				w.WriteHeader(http.StatusNotFound)
				fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"sandboxwarmpools %q not found"}`, name)
				return
			}
			fmt.Fprintf(w, `{"apiVersion":"%s/v1beta1","kind":"SandboxWarmPool","metadata":{"name":%q,"namespace":"sandboxes"},%s`, group, name, body[1:])
		default:
			http.NotFound(w, r)
		}
	}))
}

// Wait reads each warm pool's spec.replicas and status.readyReplicas
// until all are ready; past its timeout (here none: one read) it fails
// with a *NotReadyError, matching ErrNotReady, that names the warm pools
// still warming or missing.
func ExampleApplier_Wait() {
	srv := fakeWarmPools()
	defer srv.Close()
	a, err := kubeapply.New(&rest.Config{Host: srv.URL}, kubeapply.WithNamespace("sandboxes"))
	if err != nil {
		log.Fatal(err)
	}
	var refs []kubeapply.Ref
	for _, name := range []string{"agents-ready", "agents-warming", "agents-gone"} {
		refs = append(refs, kubeapply.Ref{APIVersion: kubeobjects.ExtensionsAPIVersion, Kind: kubeobjects.KindSandboxWarmPool,
			Namespace: "sandboxes", Name: name})
	}
	st, err := a.Wait(context.Background(), refs, 0)
	for _, s := range st {
		fmt.Println(s)
	}
	fmt.Println("not ready:", errors.Is(err, kubeapply.ErrNotReady))
	fmt.Println(err)
	// Output:
	// SandboxWarmPool/sandboxes/agents-ready 2/2 ready
	// SandboxWarmPool/sandboxes/agents-warming 1/3 ready
	// SandboxWarmPool/sandboxes/agents-gone missing
	// not ready: true
	// kubeapply: 2 warm pools not ready within 0s: SandboxWarmPool/sandboxes/agents-warming 1/3 ready, SandboxWarmPool/sandboxes/agents-gone missing
}
