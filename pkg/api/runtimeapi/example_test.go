package runtimeapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

func ExampleClient_Claim() {
	// a stand-in runtime answering a claim, then refusing a stale one
	stale := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b runtimeapi.ClaimBody
		_ = json.NewDecoder(r.Body).Decode(&b)
		w.Header().Set("Content-Type", "application/json")
		if stale {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(runtimeapi.ErrorBody{Error: "the view of the config repository is stale", Code: runtimeapi.CodeStale})
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(runtimeapi.Grant{RunID: "r-1", SandboxID: "sb-7", Generation: "g-1", Warm: true,
			AllocationAttempt: 1, Token: "t0k", RequestKey: b.RequestKey})
	}))
	defer srv.Close()

	c, err := runtimeapi.NewClient(srv.URL, "secret")
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := c.Claim(context.Background(), "agents", runtimeapi.ClaimBody{Tenant: "acme", RequestKey: "job-42.1"})
	fmt.Println(g.RunID, g.SandboxID, g.Warm, g.AllocationAttempt, g.RequestKey, err)

	stale = true
	_, err = c.Claim(context.Background(), "agents", runtimeapi.ClaimBody{})
	fmt.Println(runtimeapi.IsCode(err, runtimeapi.CodeStale), err)
	// Output:
	// r-1 sb-7 true 1 job-42.1 <nil>
	// true runtime: 503 Service Unavailable: the view of the config repository is stale
}
