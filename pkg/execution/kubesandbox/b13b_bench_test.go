//go:build linux

package kubesandbox_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/testharness/kubetest"
)

// BenchmarkB13bWarmClaim is benchmark B13b's claim half: on the local
// single-node cluster, the latency of warm claims through the Kubernetes
// backend (Create: a SandboxClaim watched until bound and Ready, its pod's
// images checked, its runner's identity proved through pod exec when its
// warm member became Ready, ProveWarm, as the runtime does: each round's
// Slipway claims start once the pool's members are proved) beside a
// bare SandboxClaim created and watched to Ready with client-go, on a warm
// pool of 10: in rounds, the pool ready again, 10 claims of one kind one
// after the other (every one warm), then released. 50 claims of each
// kind; it reports p50 and p99 of each and their ratio. BENCH_SMOKE=1
// makes it 6 claims of each on a pool of 3.
func BenchmarkB13bWarmClaim(b *testing.B) {
	size, total := 10, 50
	if os.Getenv("BENCH_SMOKE") != "" {
		size, total = 3, 6
	}
	n := startNode(b, "bench")
	g := n.generation(b, nil)
	n.desire(b, size)
	ctx := context.Background()
	be, err := kubesandbox.New(n.c.Config(), n.ns)
	if err != nil {
		b.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(n.c.Config())
	if err != nil {
		b.Fatal(err)
	}
	pool := kubeobjects.ObjectName(n.pool, g.ID)
	spec := specOf(b, n, g, "")
	// as the runtime does: warm members' runners proved when they are
	// Ready, off the claim's path (ProveWarm)
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go be.ProveWarm(pctx)
	proved := func() {
		for deadline := time.Now().Add(3 * time.Minute); be.ProvedWarm() < size; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d warm members proved after 3m", be.ProvedWarm(), size)
			}
		}
	}
	pathBefore := kubesandbox.PathProofs(be)
	var slipway, bare []time.Duration
	for b.Loop() {
		slipway, bare = slipway[:0], bare[:0]
		for round := 0; len(slipway) < total; round++ {
			kubetest.WaitWarmPool(b, dyn, n.ns, pool, size)
			proved()
			var ids []string
			for i := 0; i < size && len(slipway) < total; i++ {
				spec.Owner = fmt.Sprintf("r-bench-%d-%d", round, i)
				start := time.Now()
				s, err := be.Create(ctx, spec)
				if err != nil {
					b.Fatal(err)
				}
				slipway = append(slipway, time.Since(start))
				if s.Placement.LaunchType != sandbox.LaunchWarm {
					b.Fatalf("claim %d of round %d was a %s start", i, round, s.Placement.LaunchType)
				}
				ids = append(ids, s.ID)
			}
			for _, id := range ids {
				if err := be.Delete(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
			kubetest.WaitWarmPool(b, dyn, n.ns, pool, size)
			var names []string
			for i := 0; i < size && len(bare) < total; i++ {
				name := fmt.Sprintf("bare-%d-%d", round, i)
				start := time.Now()
				kubetest.BareClaim(b, dyn, n.ns, pool, name)
				bare = append(bare, time.Since(start))
				names = append(names, name)
			}
			for _, name := range names {
				kubetest.DeleteBareClaim(b, dyn, n.ns, name)
			}
		}
	}
	p := func(ds []time.Duration, q float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	sp50, sp99, bp50, bp99 := p(slipway, .5), p(slipway, .99), p(bare, .5), p(bare, .99)
	b.ReportMetric(float64(sp50.Microseconds())/1000, "slipway-p50-ms")
	b.ReportMetric(float64(sp99.Microseconds())/1000, "slipway-p99-ms")
	b.ReportMetric(float64(bp50.Microseconds())/1000, "bare-p50-ms")
	b.ReportMetric(float64(bp99.Microseconds())/1000, "bare-p99-ms")
	fmt.Fprintf(os.Stderr, "B13b: %d warm claims of each kind on a warm pool of %d: through the Kubernetes backend p50 %v p99 %v (%d runners proved on the claim's path, the rest when their member was Ready); bare SandboxClaim watched to Ready p50 %v p99 %v; backend/bare p50 %.2fx\n",
		total, size, sp50.Round(time.Millisecond), sp99.Round(time.Millisecond), kubesandbox.PathProofs(be)-pathBefore, bp50.Round(time.Millisecond), bp99.Round(time.Millisecond),
		float64(sp50)/float64(bp50))
}
