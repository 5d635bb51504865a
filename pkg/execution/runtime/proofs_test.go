package runtime_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// withTests is a generation of pool agents whose template records tests.
func (w *warmWorld) withTests(t *testing.T, from *generation.Generation, tests []templatemeta.Test) *generation.Generation {
	t.Helper()
	return w.Generation(t, "agents", from, w.TemplateWithTests(t, tests))
}

// TestProofs runs every proof check on a real warm member of a warming
// generation; a template whose test fails is refused with the test named;
// proofs of a generation the pool does not warm are refused; the proof
// claim leaves no sandbox behind and no run manifest.
func TestProofs(t *testing.T) {
	w := newWarmWorld(t)
	ctx := context.Background()
	be := newLocalBackend(t)
	store := newStore(t)
	g1 := w.generation(t, nil)
	good := w.withTests(t, g1, []templatemeta.Test{{Name: "shell", Run: []string{"sh", "-c", "echo ok"}}, {Name: "tools", Run: []string{"ls", "/bin/sh"}}})
	bad := w.withTests(t, g1, []templatemeta.Test{{Name: "broken-tool", Run: []string{"sh", "-c", "echo missing >&2; exit 7"}}})
	d := w.desired(t, "rev-1", 1, g1, good, bad)
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute)
	defer rt.Close()
	if rep := warm.Reconcile(ctx, d); len(rep.Errors) > 0 {
		t.Fatalf("reconcile: %v", rep.Errors)
	}

	res, err := rt.Prove(ctx, "agents", runtimeapi.ProofRequest{Generation: good.ID, Rollout: "ro-test", Checks: pool.Proofs})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Evidence) != len(pool.Proofs) || !res.Passed() {
		t.Fatalf("proofs of %s: %+v", good.ID, res.Evidence)
	}
	for i, e := range res.Evidence {
		if e.Check != pool.Proofs[i] || e.Generation != good.ID || e.SandboxID != res.SandboxID || e.Finished.Before(e.Started) || e.By == "" {
			t.Errorf("evidence %d: %+v", i, e)
		}
	}
	if !strings.Contains(res.Evidence[5].Reason, "no process, folder or record of it left") {
		t.Errorf("cleanup did not look for leftovers: %s", res.Evidence[5].Reason)
	}
	checkNetworkEvidence(t, res.Evidence[2])
	if !strings.Contains(res.Evidence[3].Reason, "2 tests passed") {
		t.Errorf("template-tests: %s", res.Evidence[3].Reason)
	}
	left, _ := be.List(ctx, sandbox.Filter{Pool: "agents"})
	for _, s := range left {
		if s.ID == res.SandboxID {
			t.Errorf("the proof's sandbox %s is still there", s.ID)
		}
		if s.Owner != sandbox.OwnerWarm {
			t.Errorf("sandbox %s owned by %s after the proof", s.ID, s.Owner)
		}
	}
	if ids, _ := store.Query(ctx, runmanifest.Query{Generation: good.ID}); len(ids) != 0 {
		t.Errorf("a proof claim made run manifests: %v", ids)
	}

	res, err = rt.Prove(ctx, "agents", runtimeapi.ProofRequest{Generation: bad.ID, Rollout: "ro-test", Checks: []string{"allocate", "template-tests", "cleanup"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Passed() || res.Evidence[1].Passed || !strings.Contains(res.Evidence[1].Reason, "broken-tool exited 7") || !res.Evidence[2].Passed {
		t.Errorf("a failing template test: %+v", res.Evidence)
	}

	other := w.generation(t, g1)
	for _, req := range []runtimeapi.ProofRequest{
		{Generation: other.ID, Rollout: "ro-test", Checks: []string{"allocate"}},
		{Generation: good.ID, Rollout: "ro-test", Checks: []string{"allocate", "vibes"}},
		{Generation: good.ID, Checks: []string{"allocate"}},
	} {
		if _, err := rt.Prove(ctx, "agents", req); !errors.Is(err, runtime.ErrProofRefused) {
			t.Errorf("Prove(%+v): %v, want ErrProofRefused", req, err)
		}
	}
}

// checkNetworkEvidence: the network proof probed IPv4 and IPv6 loopback
// and every non-loopback address of this host that takes a connection
// (IPv6 included), or says why it skipped one.
func checkNetworkEvidence(t *testing.T, e runtimeapi.Evidence) {
	t.Helper()
	if e.Check != "network" || !e.Passed {
		t.Fatalf("network evidence: %+v", e)
	}
	want := []string{"IPv4 127.0.0.1:", "[::1]:"}
	if ln, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		want = []string{"IPv4 127.0.0.1:", "skipped: IPv6: this host has no IPv6 listener"}
	} else {
		ln.Close()
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	v6 := false
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			if ipn.IP.To4() == nil {
				v6 = true
			}
			want = append(want, net.JoinHostPort(ipn.IP.String(), ""))
		}
	}
	if !v6 {
		want = append(want, "skipped: IPv6 non-loopback: this host has no IPv6 address other than loopback")
	}
	for _, w := range want {
		if !strings.Contains(e.Reason, w) {
			t.Errorf("network evidence does not name %q: %s", w, e.Reason)
		}
	}
	t.Logf("network evidence: %s", e.Reason)
}
