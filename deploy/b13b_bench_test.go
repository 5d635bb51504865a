//go:build linux

package deploy_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/deploy/internal/harness"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/testharness/benchtable"
	"github.com/slipway-dev/slipway/testharness/kubetest"
)

// BenchmarkB13bInCluster is benchmark B13b's claim half through the
// in-cluster runtime: overlays/single installed on the test node (the
// runtime a pod of the release's image, in-cluster config), pool agents
// set to a warm pool of 10 (slipway pool set warmSize=10 before its
// generation is promoted), and, in rounds, the pool ready again and 2 s to settle, 10
// warm claims one after the other through the runtime's Service (POST
// /v1/pools/agents/claims from the host: the claim's HTTP hop, the
// runtime's SandboxClaim watched to Ready, its images checked, its
// runner's identity proved when the member became Ready), then released;
// beside, the same rounds of bare SandboxClaims created and watched to
// Ready with client-go from the host. 50 claims of each kind; p50 and p99
// of each and their ratio. Target: p50 within 1.2x of the bare claim's.
// BENCH_SMOKE=1: 6 claims of each on a pool of 3.
func BenchmarkB13bInCluster(b *testing.B) {
	size, total, smoke := 10, 50, ""
	if os.Getenv("BENCH_SMOKE") != "" {
		size, total, smoke = 3, 6, "smoke: "
	}
	e := harness.Start(b, true)
	e.WarmSize = size
	_, rt, gen := e.JobPlanes(b, "single", 1)
	ctx := context.Background()
	const ns = "slipway-sandboxes"
	pool := kubeobjects.ObjectName("agents", gen)
	settle := func() {
		kubetest.WaitWarmPool(b, e.Dyn, ns, pool, size)
		time.Sleep(2 * time.Second) // both sides alike: the members' runners proved meanwhile
	}
	var slipway, bare []time.Duration
	for b.Loop() {
		sampler := benchtable.Start()
		slipway, bare = slipway[:0], bare[:0]
		cold := 0
		for round := 0; len(slipway) < total; round++ {
			settle()
			var grants []*runtimeapi.Grant
			for i := 0; i < size && len(slipway) < total; i++ {
				start := time.Now()
				g, err := rt.Claim(ctx, "agents", runtimeapi.ClaimBody{SessionID: fmt.Sprintf("b13b-%d-%d", round, i), DeadlineSeconds: 120})
				if err != nil {
					b.Fatalf("claim %d of round %d through Service slipway-runtime: %v", i, round, err)
				}
				slipway = append(slipway, time.Since(start))
				if !g.Warm {
					cold++
				}
				grants = append(grants, g)
			}
			for _, g := range grants {
				if err := rt.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g.Token}); err != nil {
					b.Fatalf("release %s: %v", g.RunID, err)
				}
			}
			settle()
			var names []string
			for i := 0; i < size && len(bare) < total; i++ {
				name := fmt.Sprintf("bare-%d-%d", round, i)
				start := time.Now()
				kubetest.BareClaim(b, e.Dyn, ns, pool, name)
				bare = append(bare, time.Since(start))
				names = append(names, name)
			}
			for _, name := range names {
				kubetest.DeleteBareClaim(b, e.Dyn, ns, name)
			}
		}
		if cold > 0 {
			b.Fatalf("%d of %d claims through the runtime were not warm: the figure would not be a warm claim's", cold, len(slipway))
		}
		p := func(ds []time.Duration, q float64) time.Duration {
			s := slices.Clone(ds)
			slices.Sort(s)
			return s[min(len(s)-1, int(q*float64(len(s))))]
		}
		// where in a round the time goes: claim i of each round waits for
		// the replacements of claims 0..i-1 being started on the node
		var pos []string
		for i := 0; i < size; i++ {
			var sw, bw []time.Duration
			for j := i; j < len(slipway); j += size {
				sw = append(sw, slipway[j])
			}
			for j := i; j < len(bare); j += size {
				bw = append(bw, bare[j])
			}
			pos = append(pos, fmt.Sprintf("%d: %v/%v", i, p(sw, .5).Round(time.Millisecond), p(bw, .5).Round(time.Millisecond)))
		}
		b.Logf("p50 by place in the round, through the runtime/bare: %s", strings.Join(pos, ", "))
		sp50, sp99, bp50, bp99 := p(slipway, .5), p(slipway, .99), p(bare, .5), p(bare, .99)
		ratio := float64(sp50) / float64(bp50)
		b.ReportMetric(float64(sp50.Microseconds())/1000, "slipway-p50-ms")
		b.ReportMetric(float64(bp50.Microseconds())/1000, "bare-p50-ms")
		benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B13b in cluster",
			What:    fmt.Sprintf("%s%d warm claims of each kind on a warm pool of %d, from the host", smoke, total, size),
			Slipway: fmt.Sprintf("through the in-cluster runtime's Service p50 %v p99 %v", sp50.Round(time.Millisecond), sp99.Round(time.Millisecond)),
			Peer:    fmt.Sprintf("bare SandboxClaim watched to Ready p50 %v p99 %v", bp50.Round(time.Millisecond), bp99.Round(time.Millisecond)),
			Ratio:   ratio, Target: "<= 1.2x at p50", Met: ratio <= 1.2,
			Settings: "each round: the pool ready again, 2 s to settle, claims one after the other; the runtime's claims also check images and prove the runner (at the member's Ready)"}))
	}
}
