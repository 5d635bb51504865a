package controlapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// A tenant submits a job and reads a refusal's code. The server here is a
// stand-in that answers as the control plane does.
func ExampleClient_Submit() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var s controlapi.Spec
		_ = json.NewDecoder(r.Body).Decode(&s)
		w.Header().Set("Content-Type", "application/json")
		if s.Pool != "agents" {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
			_ = json.NewEncoder(w).Encode(controlapi.ErrorBody{Code: controlapi.CodeLimitExceeded,
				Error: "tenant t0 has 10 jobs queued", Reason: "tenant_queue_full", RetryAfterSeconds: 3})
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(controlapi.Job{ID: "j-1", Tenant: "t0", Pool: s.Pool, Commands: s.Commands, State: controlapi.Queued})
	}))
	defer srv.Close()

	c, err := controlapi.NewClient(srv.URL, "swt_example")
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	j, created, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: [][]string{{"make", "test"}}})
	fmt.Println(j.ID, j.State, created, err)

	_, _, err = c.Submit(ctx, controlapi.Spec{Pool: "full", Profile: "standard", Commands: [][]string{{"true"}}})
	fmt.Println(controlapi.HasCode(err, controlapi.CodeLimitExceeded), err)
	// Output:
	// j-1 queued true <nil>
	// true control plane: 429 Too Many Requests: tenant t0 has 10 jobs queued (tenant_queue_full)
}

// An event's data, as an SSE data line carries it, and its output.
func ExampleDecodeEvent() {
	e, err := controlapi.DecodeEvent([]byte(`{"job":"j-1","seq":3,"at":"2026-12-06T06:00:00Z","kind":"stdout","data":{"command":0,"text":"ok\n"}}`))
	if err != nil {
		panic(err)
	}
	out, _ := e.Output()
	fmt.Printf("%s #%d %s %q terminal=%v\n", e.Job, e.Seq, e.Kind, out.Text, controlapi.Succeeded.Terminal())
	// Output: j-1 #3 stdout "ok\n" terminal=true
}
