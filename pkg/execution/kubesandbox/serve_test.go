//go:build linux

package kubesandbox_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const apiToken = "test-token-0123456789abcdef"

// `slipway runtime serve --backend kubernetes` serves the same API: at
// start it finds the claim an earlier runtime left (by the name of its
// open run) and releases it, finalising the run as failed; a claim through
// the API runs a command, pool status counts the cluster's warm members and
// the open claim, release deletes the claim; a claim still open when the
// runtime stops is released.
func TestServeOnKube(t *testing.T) {
	n := startNode(t, "serve")
	g := n.generation(t, nil)
	n.desire(t, 2)
	ctx := context.Background()
	state := t.TempDir()

	// The earlier runtime's claim, and its open run.
	be, err := kubesandbox.New(n.c.Config(), n.ns)
	if err != nil {
		t.Fatal(err)
	}
	left, err := be.Create(ctx, specOf(t, n, g, "r-left"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := runs.OpenSQLite(ctx, filepath.Join(state, runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Create(ctx, &runmanifest.Manifest{RunID: "r-left", SandboxID: left.ID, Pool: n.pool, AllocationAttempt: 1}); err != nil {
		t.Fatal(err)
	}
	store.Close()

	sctx, stop := context.WithCancel(ctx)
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve.Run(sctx, serve.Config{Repo: n.dir, State: state, Listen: "127.0.0.1:0", Token: apiToken,
			Verify: runtime.Verify{Skip: true}, Backend: serve.BackendKubernetes, Kubeconfig: n.c.Kubeconfig(), Namespace: n.ns},
			func(a string) { addr <- a })
	}()
	var a string
	select {
	case a = <-addr:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	defer func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("serve: %v", err)
		}
	}()
	gone(t, n, claimsGVR, kubesandbox.ClaimName("r-left"))
	c, err := runtimeapi.NewClient("http://"+a, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := c.Run(ctx, "r-left"); err != nil || m.Status != runmanifest.StatusFailed {
		t.Fatalf("the earlier runtime's run: %+v %v, want failed", m, err)
	}

	var gr *runtimeapi.Grant
	for deadline := time.Now().Add(30 * time.Second); ; {
		if gr, err = c.Claim(ctx, n.pool, runtimeapi.ClaimBody{Tenant: "t"}); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // until the first sync
	}
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, gr.RunID, runtimeapi.ExecBody{Token: gr.Token, Argv: []string{"sh", "-c", "echo hi; exit 2"}})
	if err != nil || res.ExitCode != 2 || res.Stdout != "hi\n" {
		t.Fatalf("exec: %+v %v", res, err)
	}
	st, err := c.PoolStatus(ctx, n.pool)
	if err != nil {
		t.Fatal(err)
	}
	if gs := st.Generation(g.ID); gs.Claimed != 1 || gs.Ready+gs.Warming == 0 || len(gs.Runs) != 1 || gs.Runs[0] != gr.RunID {
		t.Fatalf("pool status %+v", gs)
	}
	code := 0
	if err := c.Release(ctx, gr.RunID, runtimeapi.ReleaseBody{Token: gr.Token, ExitCode: &code}); err != nil {
		t.Fatal(err)
	}
	gone(t, n, claimsGVR, kubesandbox.ClaimName(gr.RunID))

	open, err := c.Claim(ctx, n.pool, runtimeapi.ClaimBody{Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}

	// The active generation's warm pool gone from the cluster (as after a
	// rollout drained it) while the runtime's view still routes to it: a
	// claim is answered 503 stale at once, with Retry-After, naming the
	// warm pool, not after its 2-minute deadline.
	dyn, err := n.c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	wp := kubeobjects.ObjectName(n.pool, g.ID)
	if err := dyn.Resource(warmPoolsGVR).Namespace(n.ns).Delete(ctx, wp, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Claim(ctx, n.pool, runtimeapi.ClaimBody{Tenant: "t"})
	var apiErr *runtimeapi.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable || apiErr.Code != runtimeapi.CodeStale ||
		apiErr.RetryAfter != time.Second || !strings.Contains(apiErr.Reason, wp) || time.Since(start) > time.Minute {
		t.Fatalf("a claim routed to a generation whose warm pool is gone: %v after %s; want 503 stale, Retry-After 1, naming %s",
			err, time.Since(start).Round(time.Millisecond), wp)
	}
	t.Logf("a claim routed to a gone warm pool: %v after %s", err, time.Since(start).Round(time.Millisecond))
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("serve: %v", err)
	}
	done <- nil
	gone(t, n, claimsGVR, kubesandbox.ClaimName(open.RunID))
	if all, _ := be.List(ctx, sandbox.Filter{}); len(all) != 0 {
		t.Errorf("claims left after the runtime stopped: %+v", all)
	}
}
