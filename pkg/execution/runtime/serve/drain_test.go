package serve_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/pkg/release"
	"github.com/slipway-dev/slipway/testharness/pgtest"
	"github.com/slipway-dev/slipway/testharness/registrytest"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

// A runtime replica told to stop drains: two local runtimes share one
// PostgreSQL run store (--db with --leader-elect), each recording its
// address. Replica A holds a claim (its request key, claimed again on B,
// is passed on to A, which answers the same grant) whose command (7 s, longer than the 5 s
// a stopping server used to wait) runs when A is stopped. At once A's
// /readyz fails and a new claim there is refused with 503 draining and
// Retry-After, recording nothing: the same request key is granted by B.
// A's command runs to its end and its streamed answer comes whole; the
// job's next command and its release, sent to B (A left the Service), are
// passed on to A with the same token (a request without it is refused,
// not passed on); A stops once its claim is released, saying it drained.
func TestDrainingReplicaFinishesItsClaims(t *testing.T) {
	w := runtimetest.New(t, registrytest.NewInProcess(t))
	ctx := context.Background()
	repo := filepath.Join(t.TempDir(), "config.git")
	if err := gitops.InitBare(repo, "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := release.InitConfig(ctx, repo, "main", "agents", nil, gitops.Signature{}); err != nil {
		t.Fatal(err)
	}
	if _, err := release.Promote(ctx, release.Promotion{Repo: repo, Generation: w.Generation(t, "agents", nil, ""), Activate: true, SkipVerify: true}); err != nil {
		t.Fatal(err)
	}
	dsn := pgtest.New(t)
	replica := func() (*served, *runtimeapi.Client) {
		addr := freeAddr(t)
		s := startServed(ctx, t, serve.Config{Repo: repo, State: t.TempDir(), Listen: addr, Advertise: addr, DB: dsn, LeaderElect: true,
			DrainTimeout: 60 * time.Second, SyncInterval: 300 * time.Millisecond, Verify: runtime.Verify{Skip: true}})
		c, err := runtimeapi.NewClient("http://"+s.addr, apiToken)
		if err != nil {
			t.Fatal(err)
		}
		return s, c
	}
	a, ca := replica()
	b, cb := replica()

	claim := func(c *runtimeapi.Client, key string) (*runtimeapi.Grant, error) {
		cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		return c.Claim(cctx, "agents", runtimeapi.ClaimBody{Tenant: "acme", RequestKey: key})
	}
	g1, err := claim(ca, "job-1.a1")
	if err != nil {
		t.Fatalf("claim on A: %v\n%s", err, a.log.String())
	}
	// The same key on B (a retry the Service routed to the other replica)
	// is passed on to A, which answers its grant again, adopted.
	again, err := claim(cb, "job-1.a1")
	if err != nil || again.RunID != g1.RunID || again.Token != g1.Token || !again.Adopted {
		t.Fatalf("claim job-1.a1 again, on B: %+v, %v; want A's grant of run %s, adopted\nB:\n%s", again, err, g1.RunID, b.log.String())
	}
	if !strings.Contains(b.log.String(), g1.RunID+": POST /v1/pools/agents/claims passed on") {
		t.Errorf("B's log does not say it passed the claim on:\n%s", b.log.String())
	}
	// the command, streamed; A is stopped once it has started
	started := make(chan struct{})
	var once sync.Once
	type outcome struct {
		res *runtimeapi.ExecResult
		out string
		err error
	}
	ran := make(chan outcome, 1)
	go func() {
		var mu sync.Mutex
		var out strings.Builder
		res, err := ca.ExecStream(ctx, g1.RunID, runtimeapi.ExecBody{Token: g1.Token, Argv: []string{"sh", "-c", "echo started; sleep 7; echo done"}},
			func(_ string, p []byte) {
				mu.Lock()
				out.Write(p)
				mu.Unlock()
				once.Do(func() { close(started) })
			})
		mu.Lock()
		defer mu.Unlock()
		ran <- outcome{res, out.String(), err}
	}()
	select {
	case <-started:
	case o := <-ran:
		t.Fatalf("the command ended before A was stopped: %+v\n%s", o, a.log.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("the command did not start\n%s", a.log.String())
	}
	stoppedAt := time.Now()
	a.cancel() // SIGTERM
	aDone := make(chan error, 1)
	go func() { aDone <- <-a.done }()

	// (a) not ready at once, new claims refused without using their key
	deadline := time.Now().Add(3 * time.Second)
	for {
		code, body := readyz(ctx, a.addr)
		if code == http.StatusServiceUnavailable && strings.Contains(body, `"drain"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's /readyz 3 s after it was told to stop: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err = claim(ca, "job-2.a1")
	var api *runtimeapi.APIError
	if !errors.As(err, &api) || api.Status != http.StatusServiceUnavailable || api.Code != runtimeapi.CodeDraining || api.RetryAfter < time.Second {
		t.Fatalf("a claim on draining A: %v (%+v); want 503 draining with Retry-After", err, api)
	}
	g2, err := claim(cb, "job-2.a1")
	if err != nil {
		t.Fatalf("the refused claim's key on B: %v; want it granted (A recorded nothing)\n%s", err, b.log.String())
	}
	if err := cb.Release(ctx, g2.RunID, runtimeapi.ReleaseBody{Token: g2.Token}); err != nil {
		t.Fatal(err)
	}

	// (b) the command in flight runs to its end
	var o outcome
	select {
	case o = <-ran:
	case <-time.After(60 * time.Second):
		t.Fatalf("the command did not end\n%s", a.log.String())
	}
	if o.err != nil || o.res.ExitCode != 0 || !strings.Contains(o.out, "done") {
		t.Fatalf("the command running when A was stopped: %+v, output %q, %v\n%s", o.res, o.out, o.err, a.log.String())
	}
	if took := time.Since(stoppedAt); took < 5*time.Second {
		t.Errorf("the command ended %s after A was told to stop; it sleeps 7 s", took)
	}
	select {
	case err := <-aDone:
		t.Fatalf("A stopped with its claim open: %v\n%s", err, a.log.String())
	default:
	}

	// (c) the next command and the release reach B, which passes them on
	// to A, only with the API's token
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+b.addr+"/v1/claims/"+g1.RunID+"/exec", strings.NewReader(`{"argv":["true"]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("B, asked without a token about A's claim: %d; want 401", resp.StatusCode)
	}
	res, err := cb.Exec(ctx, g1.RunID, runtimeapi.ExecBody{Token: g1.Token, Argv: []string{"sh", "-c", "echo second"}})
	if err != nil || res.ExitCode != 0 || res.Stdout != "second\n" {
		t.Fatalf("the job's next command through B: %+v, %v\nB:\n%s\nA:\n%s", res, err, b.log.String(), a.log.String())
	}
	if _, err := cb.Exec(ctx, g1.RunID, runtimeapi.ExecBody{Token: "not-the-grant-token", Argv: []string{"true"}}); !runtimeapi.IsCode(err, runtimeapi.CodeFenced) {
		t.Errorf("a wrong fencing token through B: %v; want A's answer, fenced", err)
	}
	if err := cb.Release(ctx, g1.RunID, runtimeapi.ReleaseBody{Token: g1.Token, ExitCode: new(0)}); err != nil {
		t.Fatalf("release through B: %v\n%s", err, b.log.String())
	}
	select {
	case err := <-aDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("A did not stop once its claim was released\n%s", a.log.String())
	}
	if !strings.Contains(a.log.String(), "drained: no claim open") {
		t.Errorf("A's log does not say it drained:\n%s", a.log.String())
	}
	if !strings.Contains(b.log.String(), g1.RunID+": POST /v1/claims/"+g1.RunID+"/release passed on") {
		t.Errorf("B's log does not say it passed the release on:\n%s", b.log.String())
	}
	store, err := runs.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m, err := store.Get(ctx, g1.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != runmanifest.StatusCompleted || m.ExitCode == nil || *m.ExitCode != 0 || m.ServedBy.Runtime == nil || m.ServedBy.Runtime.Address != a.addr {
		t.Errorf("run %s: status %s, exit %v, served by %+v; want completed, 0, A at %s", g1.RunID, m.Status, m.ExitCode, m.ServedBy.Runtime, a.addr)
	}
	b.stop(t)
}

// freeAddr is an address of 127.0.0.1 with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// readyz is the status and body of GET /readyz at addr (0 when it does
// not answer).
func readyz(ctx context.Context, addr string) (int, string) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var v json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, string(v)
}
