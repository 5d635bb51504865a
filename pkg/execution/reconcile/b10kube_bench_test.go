package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/testharness/benchtable"
)

// BenchmarkB10Kube is benchmark B10 on Kubernetes: L leaked claims, each
// bound to its Sandbox (with its pod), among N live ones, in one namespace
// of a real API server (etcd, kube-apiserver, agent-sandbox's CRDs), the
// reconciler on the Kubernetes backend running at its interval. L = 200
// and N = 100 ($SLIPWAY_B10K_LEAKED, $SLIPWAY_B10K_LIVE; BENCH_SMOKE=1
// makes them 10 and 5), interval 10 s ($SLIPWAY_B10_INTERVAL; 2 s under
// BENCH_SMOKE). Half the leaks are claims of runs the store never recorded
// (they wait out the grace), half claims of released runs. It reports the
// time from the end of the planting until every leaked claim, Sandbox and
// pod is gone (target: under one interval plus 10 s), that no live object
// was touched (each live claim, Sandbox and pod keeps its UID and
// resourceVersion), and the reconciler's CPU and wall time per pass with
// nothing to do.
//
// The objects are written as agent-sandbox's controller leaves a bound
// claim, and no controller or kubelet runs: 300 running pods would exceed
// a node's default of 110 pods and this 2-core machine; the reconciler's
// reads, fences and deletes are the same API calls either way (a pod that
// does not run is deleted at once, so the figure leaves out the kubelet's
// termination grace).
func BenchmarkB10Kube(b *testing.B) {
	leaked, live := 200, 100
	interval := 10 * time.Second
	if os.Getenv("BENCH_SMOKE") != "" {
		leaked, live, interval = 10, 5, 2*time.Second
	}
	if v, err := strconv.Atoi(os.Getenv("SLIPWAY_B10K_LEAKED")); err == nil && v > 0 {
		leaked = v
	}
	if v, err := strconv.Atoi(os.Getenv("SLIPWAY_B10K_LIVE")); err == nil && v > 0 {
		live = v
	}
	if v, err := time.ParseDuration(os.Getenv("SLIPWAY_B10_INTERVAL")); err == nil && v > 0 {
		interval = v
	}
	for b.Loop() {
		b10Kube(b, leaked, live, interval)
	}
}

// plantClaims plants the claims of owners, 8 at a time; record, when set,
// records each run with its bound Sandbox.
func plantClaims(b testing.TB, w *kubeWorld, owners []string, record func(owner, sb string)) (claims, sbs []string) {
	claims, sbs = make([]string, len(owners)), make([]string, len(owners))
	var wg sync.WaitGroup
	jobs := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range jobs {
				claims[i], sbs[i] = w.claim(b, owners[i], "agents", genActive, false)
			}
		})
	}
	for i := range owners {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if record != nil {
		for i, o := range owners {
			record(o, sbs[i])
		}
	}
	return claims, sbs
}

func b10Kube(b *testing.B, leaked, live int, interval time.Duration) {
	sampler := benchtable.Start()
	w := newKubeWorld(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var liveOwners []string
	for i := range live {
		liveOwners = append(liveOwners, fmt.Sprintf("r-live-%d", i))
	}
	t0 := time.Now()
	liveClaims, liveSBs := plantClaims(b, w, liveOwners, func(o, sb string) { w.run(b, o, "agents", sb, runmanifest.StatusRunning) })
	type version struct{ uid, rv string }
	before := map[string]version{}
	read := func(gvr schema.GroupVersionResource, name string) (version, bool) {
		u, err := w.res(gvr).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return version{}, false
		}
		return version{string(u.GetUID()), u.GetResourceVersion()}, true
	}
	kinds := []schema.GroupVersionResource{claimsGVR, sandboxesGVR, podsGVR}
	for i := range liveClaims {
		for k, name := range []string{liveClaims[i], liveSBs[i], liveSBs[i]} {
			v, ok := read(kinds[k], name)
			if !ok {
				b.Fatalf("live %s %s not there", kinds[k].Resource, name)
			}
			before[kinds[k].Resource+"/"+name] = v
		}
	}
	b.Logf("live: %d claims in %s", live, time.Since(t0))

	// the reconciler runs before the leaks appear
	r, err := reconcile.New(reconcile.Config{Backend: w.be, Runs: w.store, Records: w.records, Owner: "b10k/127.0.0.1:0",
		Warm: func() (map[string]map[string]bool, bool) {
			return map[string]map[string]bool{"agents": {genActive: true}}, true
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Grace: min(reconcile.DefaultGrace, interval)})
	if err != nil {
		b.Fatal(err)
	}
	var runWG sync.WaitGroup
	runWG.Go(func() { r.Run(ctx, interval) })

	t1 := time.Now()
	var ghosts, done []string
	for i := range leaked {
		if i%2 == 0 {
			ghosts = append(ghosts, fmt.Sprintf("r-ghost-%d", i))
		} else {
			done = append(done, fmt.Sprintf("r-done-%d", i))
		}
	}
	gClaims, gSBs := plantClaims(b, w, ghosts, nil)
	dClaims, dSBs := plantClaims(b, w, done, func(o, sb string) { w.run(b, o, "agents", sb, runmanifest.StatusReleased) })
	plantedAt := time.Now()
	b.Logf("leaks planted: %d claims of unrecorded runs, %d of released runs in %s", len(ghosts), len(done), plantedAt.Sub(t1))

	// until every leak is gone: no Slipway claim but the live ones, and
	// none of the leaks' Sandboxes or pods
	leakSBs := map[string]bool{}
	for _, s := range append(append([]string(nil), gSBs...), dSBs...) {
		leakSBs[s] = true
	}
	leakClaims := map[string]bool{}
	for _, c := range append(append([]string(nil), gClaims...), dClaims...) {
		leakClaims[c] = true
	}
	deadline := plantedAt.Add(interval + 10*time.Second + 2*time.Minute)
	for {
		left := 0
		for _, k := range []struct {
			gvr  schema.GroupVersionResource
			sel  string
			leak map[string]bool
		}{{claimsGVR, kubesandbox.LabelClaim + "=true", leakClaims}, {sandboxesGVR, "", leakSBs}, {podsGVR, "", leakSBs}} {
			l, err := w.res(k.gvr).List(context.Background(), metav1.ListOptions{LabelSelector: k.sel})
			if err != nil {
				b.Fatal(err)
			}
			for _, u := range l.Items {
				if k.leak[u.GetName()] {
					left++
				}
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d leaked objects left %s after the planting", left, time.Since(plantedAt))
		}
		time.Sleep(250 * time.Millisecond)
	}
	clean := time.Since(plantedAt)
	cancel()
	runWG.Wait()
	bg := context.Background()

	// zero live touched
	touched := 0
	for key, v := range before {
		res, name, _ := strings.Cut(key, "/")
		gvr := map[string]schema.GroupVersionResource{"sandboxclaims": claimsGVR, "sandboxes": sandboxesGVR, "pods": podsGVR}[res]
		if now, ok := read(gvr, name); !ok || now != v {
			touched++
		}
	}
	if touched > 0 {
		b.Fatalf("%d live objects were touched", touched)
	}

	// steady state: passes with nothing to do
	const passes = 5
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	tp := time.Now()
	for range passes {
		rep, err := r.Pass(bg)
		if err != nil {
			b.Fatal(err)
		}
		if len(rep.Found) > 0 || rep.Live != live {
			b.Fatalf("steady pass: %+v", rep)
		}
	}
	wall := time.Since(tp) / passes
	// an action the stop interrupted is unknown until a pass finds its
	// object gone; none may stay unknown
	if unknown, _ := w.records.Unknown(bg); len(unknown) > 0 {
		open, _ := w.records.Open(bg)
		b.Fatalf("cleanup unknown: %v: %+v", unknown, open)
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := (tv(ru1.Utime) + tv(ru1.Stime) - tv(ru0.Utime) - tv(ru0.Stime)) / passes

	b.ReportMetric(float64(leaked), "leaked_claims")
	b.ReportMetric(float64(live), "live_claims")
	b.ReportMetric(interval.Seconds(), "interval_s")
	b.ReportMetric(clean.Seconds(), "clean_s")
	b.ReportMetric((interval + 10*time.Second).Seconds(), "target_s")
	b.ReportMetric(float64(touched), "live_touched")
	b.ReportMetric(cpu.Seconds(), "idle_cpu_s/pass")
	b.ReportMetric(wall.Seconds(), "idle_pass_s")
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B10 Kubernetes",
		What:    fmt.Sprintf("%d leaked claims with their Sandboxes and pods among %d live, on a real API server, reconciler at %v", leaked, live, interval),
		Slipway: fmt.Sprintf("all cleaned %.1f s after planting, %d live touched", clean.Seconds(), touched), NoPeer: true,
		Target: "under one interval + 10 s, 0 live touched", Met: clean <= interval+10*time.Second && touched == 0}))
}

func tv(t syscall.Timeval) time.Duration {
	return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
}
