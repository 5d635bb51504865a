package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

const costPrices = `apiVersion: slipway.dev/v1alpha1
kind: Pricing
currency: credits
classes:
  std: {warm: 0.5, active: 2, storage: 0.1}
pools: {agents: std}
`

// TestCostOfARealRuntime runs `runtime serve` (a separate process) with
// real bubblewrap sandboxes: warm members, a warm claim that writes 4 MiB
// into its workspace and is released, another that is open when the
// runtime is killed with SIGKILL. The restarted runtime closes the
// intervals the kill left open as ended at an unknown time, and `slipway
// cost` reports the pool's states and each run's terms from the ledger.
func TestCostOfARealRuntime(t *testing.T) {
	repo, _ := runtimeConfigRepo(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(restartToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	prices := filepath.Join(dir, "pricing.yaml")
	if err := os.WriteFile(prices, []byte(costPrices), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	ctx := context.Background()
	began := time.Now()

	rt1 := startRuntime(t, repo, state, tokenFile, "--storage-sample-interval", "100ms")
	rt1.waitWarm(t, 2)
	time.Sleep(300 * time.Millisecond) // some warm idle time
	aClaiming := time.Now()
	a, err := rt1.client.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "acme"})
	if err != nil || !a.Warm {
		t.Fatalf("claim a: %+v, %v; want a warm hit", a, err)
	}
	aClaimed := time.Now()
	res, err := rt1.client.Exec(ctx, a.RunID, runtimeapi.ExecBody{Token: a.Token,
		Argv: []string{"sh", "-c", "dd if=/dev/urandom of=/workspace/blob bs=1M count=4 2>/dev/null"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	// the ledger is read while the runtime writes it: wait for a sample of the blob
	recs, err := cost.Open(ctx, filepath.Join(state, cost.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	poll(t, 10*time.Second, "a storage sample of a's 4 MiB", func() (bool, string) {
		rep, err := recs.Pool(ctx, "agents", cost.Window{Since: began}, nil)
		if err != nil {
			return false, err.Error()
		}
		return rep.Storage.PeakBytes >= 4<<20, fmt.Sprintf("%+v", rep.Storage)
	})
	recs.Close()
	zero := 0
	aReleasing := time.Now()
	if err := rt1.client.Release(ctx, a.RunID, runtimeapi.ReleaseBody{Token: a.Token, ExitCode: &zero}); err != nil {
		t.Fatal(err)
	}
	aReleased := time.Now()
	rt1.waitWarm(t, 2)
	b, err := rt1.client.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(6 * time.Second) // past the ledger's first alive mark after b's claim
	// the runtime's metrics count the time per state from its ledger
	req, _ := http.NewRequest(http.MethodGet, rt1.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+restartToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	scraped, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := telemetry.CheckExposition(bytes.NewReader(scraped)); err != nil {
		t.Error(err)
	}
	for _, want := range []string{`slipway_sandbox_state_seconds_total{class="warm_idle",pool="agents"} `, `slipway_sandbox_state_seconds_total{class="active",pool="agents"} `} {
		if !strings.Contains(string(scraped), want) {
			t.Errorf("no %s in the runtime's metrics", want)
		}
	}
	// SIGKILL: b and the warm members are open in the ledger.
	if err := rt1.stop(t, syscall.SIGKILL, 10*time.Second); err == nil {
		t.Fatal("the killed runtime exited 0")
	}
	killed := time.Now()
	rt2 := startRuntime(t, repo, state, tokenFile, "--storage-sample-interval", "100ms")
	poll(t, 10*time.Second, "the restart's ledger recovery", func() (bool, string) {
		return rt2.logged("intervals of an earlier run ended at an unknown time"), rt2.text()
	})
	rt2.waitWarm(t, 2)
	if err := rt2.stop(t, syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("the runtime did not stop cleanly: %v\n%s", err, rt2.text())
	}

	since := began.Add(-time.Second).UTC().Format(time.RFC3339Nano)
	start := time.Now()
	r := run(t, "", "cost", "--state", state, "--pool", "agents", "--since", since, "--prices", prices, "-o", "json")
	took := time.Since(start)
	if r.code != 0 {
		t.Fatalf("cost --pool: %+v", r)
	}
	var rep cost.PoolReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	st := map[cost.State]cost.StateTime{}
	for _, s := range rep.States {
		st[s.State] = s
	}
	w, act := st[cost.WarmIdle], st[cost.Active]
	// warm members of both lives: at least 2 + 1 refill + 1 refill + 2 new
	if w.Intervals < 5 || w.Seconds < 1 || w.Open != 0 || w.UnknownEnd < 1 || w.Cost == nil {
		t.Errorf("warm idle: %+v", w)
	}
	if act.Intervals != 2 || act.Open != 0 || act.UnknownEnd != 1 || act.Seconds < 5 || act.Cost == nil {
		t.Errorf("active: %+v; want a's and b's intervals, b's end unknown", act)
	}
	if rep.WarmHits != 2 || rep.ColdStarts != 0 || rep.WarmHitFraction == nil || *rep.WarmHitFraction != 1 {
		t.Errorf("warm hits %d, cold starts %d, fraction %v", rep.WarmHits, rep.ColdStarts, rep.WarmHitFraction)
	}
	if rep.UnusedWarmMinutes*60 != w.Seconds {
		t.Errorf("unused warm minutes %v for %v s of warm idle", rep.UnusedWarmMinutes, w.Seconds)
	}
	if rep.Storage.Samples == 0 || rep.Storage.PeakBytes < 4<<20 || rep.Storage.GiBHours <= 0 || rep.Storage.Cost == nil {
		t.Errorf("storage: %+v; want samples with a's 4 MiB", rep.Storage)
	}
	if len(rep.Unknown) == 0 || !strings.Contains(strings.Join(rep.Unknown, "\n"), "ended at an unknown time") {
		t.Errorf("unknown: %q; want the killed runtime's intervals named", rep.Unknown)
	}
	t.Logf("cost --pool took %v", took) // a figure, not an assertion

	r = run(t, "", "cost", "--state", state, "--run", a.RunID, "--prices", prices, "-o", "json")
	if r.code != 0 {
		t.Fatalf("cost --run: %+v", r)
	}
	var rc cost.RunCost
	if err := json.Unmarshal([]byte(r.stdout), &rc); err != nil {
		t.Fatal(err)
	}
	terms := map[string]cost.Term{}
	for _, tm := range rc.Terms {
		terms[tm.Name] = tm
	}
	// a was active from inside its claim to inside its release
	if q := terms[cost.TermActive].Quantity; q == nil || *q*3600 < aReleasing.Sub(aClaimed).Seconds() || *q*3600 > aReleased.Sub(aClaiming).Seconds() || terms[cost.TermActive].Cost == nil {
		t.Errorf("a's active compute: %+v", terms[cost.TermActive])
	}
	if q := terms[cost.TermWarmIdle].Quantity; q == nil || *q*3600 < 0.3 || terms[cost.TermWarmIdle].Cost == nil {
		t.Errorf("a's warm idle before its claim: %+v; want at least the 300 ms it waited", terms[cost.TermWarmIdle])
	}
	if q := terms[cost.TermStorage].Quantity; q == nil || *q <= 0 || terms[cost.TermStorage].Cost == nil {
		t.Errorf("a's storage: %+v", terms[cost.TermStorage])
	}
	if e := terms[cost.TermEgress]; e.Quantity == nil || *e.Quantity != 0 || e.Cost == nil || *e.Cost != 0 {
		t.Errorf("a's egress (deny network: none, so zero at any price): %+v", e)
	}
	if got := strings.Join(rc.Unknown, ","); got != "model tokens,node overhead" || rc.Attempts != 1 || rc.Open {
		t.Errorf("a: unknown %q, attempts %d, open %v", got, rc.Attempts, rc.Open)
	}

	r = run(t, "", "cost", "--state", state, "--run", b.RunID, "--prices", prices)
	if r.code != 0 || !strings.Contains(r.stdout, "its runtime was killed: it ended up to") || !strings.Contains(r.stdout, "not a total, unknown:") ||
		!strings.Contains(r.stdout, "1 allocation attempt\n") ||
		!strings.Contains(r.stdout, "active compute after its runtime was killed") {
		t.Errorf("cost --run b (text): %+v", r)
	}
	t.Logf("cost --run b:\n%s", r.stdout)
	// b's known active time ends at the last alive mark: before the kill
	if r := run(t, "", "cost", "--state", state, "--run", b.RunID, "-o", "json"); r.code == 0 {
		var rb cost.RunCost
		if err := json.Unmarshal([]byte(r.stdout), &rb); err != nil {
			t.Fatal(err)
		}
		if q := rb.Terms[0].Quantity; q == nil || *q*3600 > killed.Sub(began).Seconds() || rb.Terms[0].Cost != nil {
			t.Errorf("b without prices: %+v", rb.Terms[0])
		}
	}
	r = run(t, "", "cost", "--state", state, "--pool", "agents", "--since", since, "--prices", prices)
	if r.code != 0 || !strings.Contains(r.stdout, "retained") || !strings.Contains(r.stdout, "not applicable") || !strings.Contains(r.stdout, "warm-hit fraction 1.000") {
		t.Errorf("cost --pool (text): %+v", r)
	}
	t.Logf("cost --pool:\n%s", r.stdout)
}

// TestCostCommand: usage errors, an unknown run, and the time of a pool
// report over 20,000 intervals and 10,000 storage samples.
func TestCostCommand(t *testing.T) {
	ctx := context.Background()
	state := t.TempDir()
	if r := run(t, "", "cost", "--state", state, "--pool", "agents"); r.code != 2 || !strings.Contains(r.stderr, "no cost ledger at") {
		t.Errorf("no ledger: %+v", r)
	}
	l, err := cost.OpenLedger(ctx, filepath.Join(state, cost.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-10 * time.Hour)
	for i := range 10000 {
		id := fmt.Sprintf("s-%05d", i)
		at := t0.Add(time.Duration(i) * 3 * time.Second)
		l.Enter(cost.Entry{SandboxID: id, Pool: "agents", Generation: "g-1", State: cost.WarmIdle, At: at})
		l.Enter(cost.Entry{SandboxID: id, Pool: "agents", Generation: "g-1", State: cost.Active, RunID: "r-" + id, At: at.Add(time.Second)})
		l.Sample([]cost.Usage{{SandboxID: id, Pool: "agents", Generation: "g-1", Bytes: 1 << 20}}, at.Add(time.Second), time.Second)
		l.Leave(id, at.Add(2*time.Second))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := run(t, "", "cost", "--state", state, "--pool", "agents", "--since", "11h", "-o", "json")
	took := time.Since(start)
	var rep cost.PoolReport
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rep) != nil {
		t.Fatalf("cost: %+v", r)
	}
	if rep.States[0].Seconds != 10000 || rep.States[1].Seconds != 10000 || rep.WarmHits != 10000 || rep.Storage.Samples != 10000 || rep.Known != 0 || len(rep.Unknown) != 3 {
		t.Errorf("report over 20,000 intervals: %+v", rep)
	}
	// a figure, not an assertion: a timed test fails on a busy machine
	// (quiet, with -race: about 0.1 s)
	t.Logf("cost --pool over 20,000 intervals and 10,000 samples: %v", took)
	if r := run(t, "", "cost", "--state", state, "--run", "r-nope"); r.code != 1 || !strings.Contains(r.stderr, "no interval of run r-nope") {
		t.Errorf("unknown run: %+v", r)
	}
	for _, args := range [][]string{
		{"cost", "--state", state},
		{"cost", "--state", state, "--pool", "agents", "--run", "r-1"},
		{"cost", "--pool", "agents"},
		{"cost", "--state", state, "--pool", "agents", "--since", "yesterday"},
		{"cost", "--state", state, "--pool", "agents", "--prices", filepath.Join(state, "missing.yaml")},
	} {
		if r := run(t, "", args...); r.code != 2 {
			t.Errorf("%q: %+v, want exit 2", args, r)
		}
	}
	bad := filepath.Join(state, "pricing.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(costPrices, "storage: 0.1", "storage: -1", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "", "cost", "--state", state, "--pool", "agents", "--prices", bad); r.code != 2 || !strings.Contains(r.stderr, "pricing.yaml:5: classes.std.storage") {
		t.Errorf("bad prices: %+v", r)
	}
}
