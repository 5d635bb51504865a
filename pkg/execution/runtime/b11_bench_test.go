package runtime_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/egress"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
)

// BenchmarkB11BoundsCost is benchmark B11's runtime half: B6's claim
// storm (concurrent Runtime.Claim on the local bubblewrap backend, a real
// runner, SQLite run store) on a pool without limits or network and
// without the sandbox's protections (local.WithUnsafeNoSeccomp: no seccomp
// filter, user namespaces allowed), then on one with every limit (cgroup
// cpu, memory and pids where the host has them, RLIMIT_NOFILE, a sized
// tmpfs workspace), an allow-list network (a per-sandbox egress proxy,
// forwarded by the runner) and the protections every sandbox has by
// default (the seccomp filter, --disable-userns in a user namespace of
// its own), and on the bounded pool without the protections, in the same
// run. The runner is non-dumpable in all: that is one prctl in the
// runner's binary.
// It prints warm-hit p99 and cold-start p50 of each on lines starting
// "B11". Targets: warm p99 with bounds under 20 ms; cold-start p50 with
// bounds within 1.2x of without, and within 1.2x of the same bounds
// without the protections, each over two rounds taken in the order off,
// on, bare, bare, on, off. (The proxy's throughput is B11's other
// half, in package egress.)
//
//	go test -run '^$' -bench B11 -benchtime 1x -timeout 30m ./pkg/execution/runtime/
//	BENCH_SMOKE=1 go test -run '^$' -bench B11 -benchtime 1x ./pkg/execution/runtime/   # seconds
func BenchmarkB11BoundsCost(b *testing.B) {
	warmSize, claims := 20, 60
	if os.Getenv("BENCH_SMOKE") != "" {
		warmSize, claims = 4, 12
	}
	const warmTarget, coldRatio = 20 * time.Millisecond, 1.2
	ctx := context.Background()
	w := newWarmWorld(b)
	g1 := w.generation(b, nil)
	type result struct{ warm, cold []time.Duration }
	round := func(bounded, protected bool) result {
		var rtp atomic.Pointer[runtime.Runtime]
		opts := []local.Option{local.WithEgressRecorder(func(id string, a egress.Attempt) { rtp.Load().RecordEgress(id, a) })}
		if !protected {
			opts = append(opts, local.WithUnsafeNoSeccomp())
		}
		be := newLocalBackend(b, opts...)
		d := w.desired(b, "rev-b11", warmSize, g1)
		if bounded {
			spec := &d.Pools["agents"].Pool.Spec
			spec.Limits = pool.Limits{CPU: "1", Memory: "256Mi", Pids: 256, OpenFiles: 1024, Workspace: "64Mi"}
			spec.AcceptUnenforced = pool.LimitNames // a host without cgroups still runs it (and says so)
			spec.Network = pool.Network{Mode: "allow-list", Allow: []string{"192.0.2.10/32:443"}}
		}
		warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(b.TempDir()))
		rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, newStore(b), time.Minute)
		defer rt.Close()
		rtp.Store(rt)
		fillWarm(b, ctx, warm, be, d, g1.ID, warmSize)
		grants := make([]*runtimeapi.Grant, claims)
		lat := make([]time.Duration, claims)
		errs := make([]error, claims)
		start := make(chan struct{})
		var ready, done sync.WaitGroup
		for i := range claims {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				ready.Done()
				<-start
				t0 := time.Now()
				grants[i], errs[i] = rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "bench", SessionID: fmt.Sprintf("s-%d", i)})
				lat[i] = time.Since(t0)
			}()
		}
		ready.Wait()
		close(start)
		done.Wait()
		var r result
		for i, g := range grants {
			switch {
			case errs[i] != nil:
				b.Fatalf("claim %d (bounded %v): %v", i, bounded, errs[i])
			case g.Warm:
				r.warm = append(r.warm, lat[i])
			default:
				r.cold = append(r.cold, lat[i])
			}
		}
		var rel sync.WaitGroup
		sem := make(chan struct{}, 16)
		for _, g := range grants {
			rel.Add(1)
			sem <- struct{}{}
			go func() {
				defer rel.Done()
				defer func() { <-sem }()
				if err := rt.Release(ctx, g.RunID, g.Token, nil); err != nil {
					b.Errorf("release %s: %v", g.RunID, err)
				}
			}()
		}
		rel.Wait()
		if len(r.warm) == 0 || len(r.cold) == 0 {
			b.Fatalf("bounded %v: %d warm hits and %d cold starts; both are measured", bounded, len(r.warm), len(r.cold))
		}
		return r
	}
	// Rounds in the order off, on, on, off, samples pooled by kind: the
	// later rounds of a process run on a machine its earlier ones warmed
	// (page cache, cgroup and mount tables, the template unpacked), and
	// the mirrored order gives each kind the same share of that.
	// A third kind, bounded without the protections, isolates what the
	// protections alone cost: off, on, bare, bare, on, off.
	type kind struct{ bounded, protected bool }
	var off, on, bare result
	for b.Loop() {
		off, on, bare = result{}, result{}, result{}
		for _, k := range []kind{{false, false}, {true, true}, {true, false}, {true, false}, {true, true}, {false, false}} {
			r := round(k.bounded, k.protected)
			p := &off
			switch {
			case k.bounded && k.protected:
				p = &on
			case k.bounded:
				p = &bare
			}
			p.warm, p.cold = append(p.warm, r.warm...), append(p.cold, r.cold...)
		}
	}
	offW, onW := percentile(off.warm, 99), percentile(on.warm, 99)
	offC, onC := percentile(off.cold, 50), percentile(on.cold, 50)
	ratio := float64(onC) / float64(offC)
	bareW, bareC := percentile(bare.warm, 99), percentile(bare.cold, 50)
	protRatio := float64(onC) / float64(bareC)
	b.ReportMetric(ms(onW), "bounded-warm-p99-ms")
	b.ReportMetric(ratio, "cold-p50-ratio")
	b.ReportMetric(protRatio, "protections-cold-p50-ratio")
	verdict := func(ok bool) string {
		if ok {
			return "MET"
		}
		return "MISSED"
	}
	fmt.Printf("B11: warm pool %d, %d concurrent claims each, local bubblewrap backend; bounds = limits (cpu, memory, pids, openFiles, workspace) + allow-list egress proxy + seccomp filter and --disable-userns (without: none of them)\n", warmSize, claims)
	fmt.Printf("B11: without bounds: warm n=%-3d p99=%8.2fms  cold n=%-3d p50=%8.2fms\n", len(off.warm), ms(offW), len(off.cold), ms(offC))
	fmt.Printf("B11: with bounds:    warm n=%-3d p99=%8.2fms  cold n=%-3d p50=%8.2fms\n", len(on.warm), ms(onW), len(on.cold), ms(onC))
	fmt.Printf("B11: bounds without seccomp and --disable-userns: warm n=%-3d p99=%8.2fms  cold n=%-3d p50=%8.2fms\n", len(bare.warm), ms(bareW), len(bare.cold), ms(bareC))
	fmt.Printf("B11: the protections alone: cold p50 ratio %.2fx (target <= %.1fx: %s)\n", protRatio, coldRatio, verdict(protRatio <= coldRatio))
	fmt.Printf("B11: warm p99 with bounds %.2fms (target < %v: %s); cold p50 ratio %.2fx (target <= %.1fx: %s)\n",
		ms(onW), warmTarget, verdict(onW < warmTarget), ratio, coldRatio, verdict(ratio <= coldRatio))
}
