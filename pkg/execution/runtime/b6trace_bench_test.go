package runtime_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/telemetry"
	"github.com/slipway-dev/slipway/testharness/benchtable"
)

// BenchmarkB6TracingOverhead is B6's tracing overhead: warm claims with
// tracing on against the same claims with it off, side by side in one
// run. Two Runtimes share one warm pool (local bubblewrap backend, a real
// runner, SQLite run store): one records its spans to a ring
// (runtime.WithTracing, as runtime serve does), each claim a child of a
// caller's traceparent as the control plane sends it; the other records
// none. Each round fills the pool with warmSize ready members and makes
// warmSize concurrent claims (all warm hits), every other one on the
// traced side, so both sides meet the same load at the same moment (on
// this shared machine the load moves a lot between storms); the p99 of
// each side's warm claims over all rounds and their ratio are printed on
// lines starting "B6 tracing". Target: on within 1.1x of off.
//
//	go test -run '^$' -bench B6TracingOverhead -benchtime 1x -timeout 30m ./pkg/execution/runtime/
//	BENCH_SMOKE=1 go test -run '^$' -bench B6TracingOverhead -benchtime 1x ./pkg/execution/runtime/
func BenchmarkB6TracingOverhead(b *testing.B) {
	warmSize, rounds := 50, 8
	if os.Getenv("BENCH_SMOKE") != "" {
		warmSize, rounds = 10, 2
	}
	const target = 1.1
	ctx := context.Background()
	w := newWarmWorld(b)
	be := newLocalBackendAt(b, b.TempDir())
	sampler := benchtable.Start()
	store := newStore(b)
	g1 := w.generation(b, nil)
	d := w.desired(b, "rev-b6t", warmSize, g1)
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(b.TempDir()))
	tr, err := telemetry.NewTracing(ctx)
	if err != nil {
		b.Fatal(err)
	}
	desired := func() (*runtime.Desired, time.Time) { return d, time.Now() }
	on := runtime.NewRuntime(desired, warm, store, time.Minute, runtime.WithTracing(tr))
	defer on.Close()
	off := runtime.NewRuntime(desired, warm, store, time.Minute)
	defer off.Close()
	caller, _ := telemetry.NewTracing(ctx)

	// storm makes warmSize concurrent claims, every other one on the
	// traced runtime, so that both sides meet the same load at the same
	// moment, and returns their latencies by side; every one must be a warm
	// hit. The claims are released after (not timed).
	storm := func(round int) (onLat, offLat []time.Duration) {
		fillWarm(b, ctx, warm, be, d, g1.ID, warmSize)
		grants := make([]*runtimeapi.Grant, warmSize)
		rts := make([]*runtime.Runtime, warmSize)
		lat := make([]time.Duration, warmSize)
		errs := make([]error, warmSize)
		start := make(chan struct{})
		var ready, done sync.WaitGroup
		for i := range warmSize {
			traced := (i+round)%2 == 0
			rts[i] = off
			if traced {
				rts[i] = on
			}
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				cctx := ctx
				if traced { // the control plane's claim span, as the API's header brings it
					sctx, s := caller.Tracer().Start(telemetry.InJob(ctx, fmt.Sprintf("j-%d-%d", round, i)), "claim")
					cctx = telemetry.FromTraceParent(ctx, telemetry.TraceParent(sctx))
					s.End()
				}
				ready.Done()
				<-start
				t0 := time.Now()
				grants[i], errs[i] = rts[i].Claim(cctx, runtime.ClaimRequest{Pool: "agents", Tenant: "bench", SessionID: fmt.Sprintf("s-%d-%d", round, i)})
				lat[i] = time.Since(t0)
			}()
		}
		ready.Wait()
		close(start)
		done.Wait()
		var rel sync.WaitGroup
		for i, g := range grants {
			if errs[i] != nil {
				b.Fatalf("claim %d: %v", i, errs[i])
			}
			if !g.Warm {
				b.Fatalf("claim %d was a cold start: the pool held fewer than %d ready members", i, warmSize)
			}
			if rts[i] == on {
				onLat = append(onLat, lat[i])
			} else {
				offLat = append(offLat, lat[i])
			}
			rel.Go(func() {
				if err := rts[i].Release(ctx, g.RunID, g.Token, nil); err != nil {
					b.Errorf("release %s: %v", g.RunID, err)
				}
			})
		}
		rel.Wait()
		return onLat, offLat
	}

	var onLat, offLat []time.Duration
	for b.Loop() {
		onLat, offLat = onLat[:0], offLat[:0]
		for r := range rounds {
			a, o := storm(r)
			onLat, offLat = append(onLat, a...), append(offLat, o...)
		}
	}
	if n := len(tr.Ring().Trace(telemetry.JobTraceID("j-0-0"))); n < 2 {
		b.Fatalf("the traced side recorded %d spans of a claim, want its runtime claim and sandbox ready", n)
	}
	on99, off99 := percentile(onLat, 99), percentile(offLat, 99)
	on50, off50 := percentile(onLat, 50), percentile(offLat, 50)
	ratio := ms(on99) / ms(off99)
	b.ReportMetric(ms(on99), "traced-p99-ms")
	b.ReportMetric(ms(off99), "untraced-p99-ms")
	b.ReportMetric(ratio, "on/off-p99")
	verdict := "MET"
	if ratio > target {
		verdict = "MISSED"
	}
	fmt.Printf("B6 tracing: warm pool %d, %d concurrent warm claims a round, half of them traced, %d rounds\n", warmSize, warmSize, rounds)
	fmt.Printf("B6 tracing: on:  n=%-3d p50=%7.2fms p99=%7.2fms\n", len(onLat), ms(on50), ms(on99))
	fmt.Printf("B6 tracing: off: n=%-3d p50=%7.2fms p99=%7.2fms\n", len(offLat), ms(off50), ms(off99))
	fmt.Printf("B6 tracing: p99 on/off %.2fx (target <= %.1fx: %s); p50 on/off %.2fx\n", ratio, target, verdict, ms(on50)/ms(off50))
	smoke := ""
	if os.Getenv("BENCH_SMOKE") != "" {
		smoke = "smoke: "
	}
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B6 tracing",
		What:    fmt.Sprintf("%swarm claims, pool %d, %d at once (half traced), %d rounds (bubblewrap, SQLite)", smoke, warmSize, warmSize, rounds),
		Slipway: fmt.Sprintf("tracing on: warm p99 %.1f ms", ms(on99)),
		Peer:    fmt.Sprintf("tracing off, same pool, same run: warm p99 %.1f ms", ms(off99)),
		Ratio:   ratio, Target: "<= 1.1x off", Met: ratio <= target,
		Settings: "on: spans to an in-memory ring (runtime serve's default without OTLP), each claim under a caller's traceparent; off: no tracer"}))
}
