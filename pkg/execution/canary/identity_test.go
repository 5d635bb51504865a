package canary_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/canary"
)

// A runner that is not the one granted fails the identity step. A real
// runtime never hands out such a runner (the backend refuses it at
// create, and the runner's file is read-only in the sandbox), so this one
// fault is played by a runtime API that answers with the runner's word
// changed; the round still releases its claim.
func TestIdentityMismatchFails(t *testing.T) {
	const pinned = "sha256:" + "aa00aa00aa00aa00aa00aa00aa00aa00aa00aa00aa00aa00aa00aa00aa00aa00"
	for _, tc := range []struct {
		name string
		lie  func(*runtimeapi.RunnerIdentity)
		want string
	}{
		{"binary", func(id *runtimeapi.RunnerIdentity) { id.RunnerBinarySHA256 = "sha256:" + strings.Repeat("b", 64) }, `the runner's binary is "sha256:bbbb`},
		{"generation", func(id *runtimeapi.RunnerIdentity) { id.Generation = "g-other" }, `the runner's generation is "g-other", want "g-1"`},
		{"sandbox", func(id *runtimeapi.RunnerIdentity) { id.SandboxID = "sb-other" }, `the runner's sandbox is "sb-other", want "sb-1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var released atomic.Bool
			mux := http.NewServeMux()
			answer := func(pattern string, v func() any) {
				mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { json.NewEncoder(w).Encode(v()) })
			}
			answer("POST /v1/pools/agents/claims", func() any {
				return runtimeapi.Grant{RunID: "r-1", SandboxID: "sb-1", Generation: "g-1", AllocationAttempt: 1, Token: "tok"}
			})
			answer("POST /v1/claims/r-1/identity", func() any {
				id := runtimeapi.RunnerIdentity{RunnerBinarySHA256: pinned, Generation: "g-1", SandboxID: "sb-1", ProtocolVersion: 1, MinProtocolVersion: 1}
				tc.lie(&id)
				return runtimeapi.ClaimIdentity{RunID: "r-1", SandboxID: "sb-1", Generation: "g-1", AllocationAttempt: 1, RunnerPath: "/usr/local/bin/slipway-runner", Runner: id}
			})
			answer("GET /v1/runs/r-1", func() any {
				m := runmanifest.Manifest{RunID: "r-1", SandboxID: "sb-1", Generation: "g-1", Pool: "agents", AllocationAttempt: 1, RunnerBinarySHA256: pinned, Status: runmanifest.StatusGranted}
				if released.Load() {
					m.Status, m.Lifecycle.ResourcesReleased = runmanifest.StatusCompleted, time.Now()
				}
				return m
			})
			answer("POST /v1/claims/r-1/release", func() any { released.Store(true); return map[string]string{"released": "r-1"} })
			answer("GET /v1/pools/agents", func() any { return runtimeapi.PoolStatus{Pool: "agents", Generations: []runtimeapi.GenerationStatus{}} })
			mux.HandleFunc("POST /v1/claims/r-1/exec", func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusNotFound)
				json.NewEncoder(w).Encode(map[string]string{"error": "runtime: no such claim: r-1"})
			})
			hs := httptest.NewServer(mux)
			defer hs.Close()
			client, _ := runtimeapi.NewClient(hs.URL, apiToken)
			c, err := canary.New(client, "agents")
			if err != nil {
				t.Fatal(err)
			}
			r, _ := c.Round(context.Background())
			if r.Passed || r.FailedStep != canary.StepIdentity || !strings.Contains(r.Reason, tc.want) || !released.Load() {
				t.Fatalf("failed at %q: %s (released %v), want identity: %s", r.FailedStep, r.Reason, released.Load(), tc.want)
			}
			if rel := r.Steps[len(r.Steps)-1]; rel.Step != canary.StepRelease || rel.Result != canary.Pass {
				t.Errorf("release: %+v", rel)
			}
		})
	}
}
