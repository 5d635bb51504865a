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
// generation is promoted), and, in rounds, the pool ready again and 2 s to
// settle, then warm claims one after the other (in one of two designs,
// below), each either through the runtime's Service (POST
// /v1/pools/agents/claims from the host: the claim's HTTP hop, the
// runtime's SandboxClaim watched to Ready, its images checked, its
// runner's identity proved when the member became Ready), or a bare
// SandboxClaim created and watched to Ready with client-go from the host;
// then all are released. 50 claims of each kind; p50 and p99 of each and
// their ratio. Target: p50 within 1.2x of the bare claim's. BENCH_SMOKE=1:
// 6 claims of each on a pool of 3.
//
// It measures twice, in two designs, and reports both. Turns: within
// each round the two kinds take turns, so both meet the node at the same
// moments at every place (claim i of a round waits for the node starting
// the replacements of claims 0..i-1: place 0 takes about 50 ms, place 9
// about 300 ms). Blocks: a round of the runtime's claims, then a round of
// bare ones, so the runtime's claims also meet what the runtime itself
// keeps doing on the node while they are held (heartbeats among it), and
// the bare ones do not. Blocks swing more between runs of one code (0.94x
// to 1.47x before bfb2872); turns are steadier but share the runtime's
// load with the bare claims. Both are the target's.
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
		time.Sleep(2 * time.Second) // the members' runners proved meanwhile
	}
	// a claim's latency and its place in its round
	type sample struct {
		d     time.Duration
		place int
	}
	n := 0 // claims made, for unique names across both designs
	claimRuntime := func(round, i int, grants *[]*runtimeapi.Grant) (sample, bool) {
		n++
		start := time.Now()
		g, err := rt.Claim(ctx, "agents", runtimeapi.ClaimBody{SessionID: fmt.Sprintf("b13b-%d", n), DeadlineSeconds: 120})
		if err != nil {
			b.Fatalf("claim %d of round %d through Service slipway-runtime: %v", i, round, err)
		}
		*grants = append(*grants, g)
		return sample{time.Since(start), i}, g.Warm
	}
	claimBare := func(round, i int, names *[]string) sample {
		n++
		name := fmt.Sprintf("bare-%d", n)
		start := time.Now()
		kubetest.BareClaim(b, e.Dyn, ns, pool, name)
		*names = append(*names, name)
		return sample{time.Since(start), i}
	}
	release := func(grants []*runtimeapi.Grant, names []string) {
		for _, g := range grants {
			if err := rt.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g.Token}); err != nil {
				b.Fatalf("release %s: %v", g.RunID, err)
			}
		}
		for _, name := range names {
			kubetest.DeleteBareClaim(b, e.Dyn, ns, name)
		}
	}
	// measure makes total claims of each kind, taking turns within each
	// round (turns) or in rounds of one kind each, a round of the
	// runtime's then a bare one (blocks: the runtime's claims meet only
	// what the runtime itself keeps doing on the node, its held claims'
	// heartbeats among it).
	measure := func(turns bool) (slipway, bare []sample) {
		cold := 0
		for round := 0; len(slipway) < total || len(bare) < total; round++ {
			settle()
			var grants []*runtimeapi.Grant
			var names []string
			for i := 0; i < size; i++ {
				runtimeTurn := !turns || (i+round)%2 == 0
				switch {
				case runtimeTurn && len(slipway) < total:
					x, warm := claimRuntime(round, i, &grants)
					slipway = append(slipway, x)
					if !warm {
						cold++
					}
				case turns && !runtimeTurn && len(bare) < total:
					bare = append(bare, claimBare(round, i, &names))
				}
			}
			release(grants, names)
			if turns {
				continue
			}
			settle()
			names = nil
			for i := 0; i < size && len(bare) < total; i++ {
				bare = append(bare, claimBare(round, i, &names))
			}
			release(nil, names)
		}
		if cold > 0 {
			b.Fatalf("%d of %d claims through the runtime were not warm: the figure would not be a warm claim's", cold, len(slipway))
		}
		return slipway, bare
	}
	durations := func(ss []sample, place int) []time.Duration {
		var ds []time.Duration
		for _, x := range ss {
			if place < 0 || x.place == place {
				ds = append(ds, x.d)
			}
		}
		return ds
	}
	p := func(ds []time.Duration, q float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	mean := func(ds []time.Duration) time.Duration {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		return sum / time.Duration(len(ds))
	}
	for b.Loop() {
		for _, turns := range []bool{true, false} {
			design, settings := "blocks", "each round: the pool ready again, 2 s to settle, the runtime's claims one after the other; then the same for bare claims"
			if turns {
				design, settings = "turns", "each round: the pool ready again, 2 s to settle, claims one after the other, the two kinds taking turns"
			}
			sampler := benchtable.Start()
			slipway, bare := measure(turns)
			var pos []string
			for i := 0; i < size; i++ {
				pos = append(pos, fmt.Sprintf("%d: %v/%v", i, p(durations(slipway, i), .5).Round(time.Millisecond), p(durations(bare, i), .5).Round(time.Millisecond)))
			}
			b.Logf("%s: p50 by place in the round, through the runtime/bare: %s", design, strings.Join(pos, ", "))
			all, allBare := durations(slipway, -1), durations(bare, -1)
			b.Logf("%s: means: through the runtime %v, bare %v (%.2fx)", design, mean(all).Round(time.Millisecond), mean(allBare).Round(time.Millisecond), float64(mean(all))/float64(mean(allBare)))
			sp50, sp99, bp50, bp99 := p(all, .5), p(all, .99), p(allBare, .5), p(allBare, .99)
			ratio := float64(sp50) / float64(bp50)
			b.ReportMetric(float64(sp50.Microseconds())/1000, design+"-slipway-p50-ms")
			b.ReportMetric(float64(bp50.Microseconds())/1000, design+"-bare-p50-ms")
			benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B13b in cluster, " + design,
				What:    fmt.Sprintf("%s%d warm claims of each kind on a warm pool of %d, from the host", smoke, total, size),
				Slipway: fmt.Sprintf("through the in-cluster runtime's Service p50 %v p99 %v", sp50.Round(time.Millisecond), sp99.Round(time.Millisecond)),
				Peer:    fmt.Sprintf("bare SandboxClaim watched to Ready p50 %v p99 %v", bp50.Round(time.Millisecond), bp99.Round(time.Millisecond)),
				Ratio:   ratio, Target: "<= 1.2x at p50", Met: ratio <= 1.2,
				Settings: settings + "; the runtime's claims also check images and prove the runner (at the member's Ready)"}))
		}
	}
}
