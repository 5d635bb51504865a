package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/isolate"
	"github.com/slipway-dev/slipway/pkg/telemetry"
	"github.com/slipway-dev/slipway/testharness/benchtable"
)

// BenchmarkB10 is benchmark B10: N leaked sandboxes and N expired leases
// planted among N live sandboxes on the local backend (N = $SLIPWAY_B10_N,
// default 1000; BENCH_SMOKE=1 makes it 20), with the reconciler running
// at its interval ($SLIPWAY_B10_INTERVAL, default 10s; 2s under
// BENCH_SMOKE). It reports the time from the end of the planting until
// every leak is cleaned (target: under one interval plus 10 s), that no
// live sandbox was touched, the reconciler's CPU per pass with nothing to
// do (getrusage), and the scrape time of /metrics with 100 pools.
//
// What is planted, per class of N: up to 5 real bubblewrap sandboxes
// (Backend.Create: runner, template, namespaces), and the rest as records
// in the backend's state directory (sandbox.json, as Create writes it,
// copied from a real sandbox's with a new id and owner) whose processes are
// real host processes (sleep, each the leader of its process group, as
// bwrap is), 50 records to a process. 3,000 bubblewrap sandboxes (each a
// bwrap, a pid 1 and a runner, plus a root and a workspace) would take
// this 2-core machine, shared with other work, half an hour to start; the
// planted records go through the same List, owner swap and Delete (kill
// by the recorded pids, cgroup, workspace, folder) as real ones. Because
// a live record shares its process with 49 others, deleting one live
// record by mistake would kill its process and make 49 more dead: the
// check that every live record still runs catches any touch.
//
// Classes: live (owner an open run whose manifest names the sandbox),
// expired leases (owner a released run), leaked (owner a run that is not
// recorded: half of them dead, half running, which wait out the grace).
func BenchmarkB10(b *testing.B) {
	n := 1000
	interval := 10 * time.Second
	if os.Getenv("BENCH_SMOKE") != "" {
		n, interval = 20, 2*time.Second
	}
	if v, err := strconv.Atoi(os.Getenv("SLIPWAY_B10_N")); err == nil && v > 0 {
		n = v
	}
	if v, err := time.ParseDuration(os.Getenv("SLIPWAY_B10_INTERVAL")); err == nil && v > 0 {
		interval = v
	}
	for b.Loop() {
		b10(b, n, interval)
	}
}

func b10(b *testing.B, n int, interval time.Duration) {
	sampler := benchtable.Start()
	w := newWorld(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const pool = "agents"
	real := min(n, 5)
	sbDir := filepath.Join(w.dir, "sandboxes", "sandboxes")

	// processes the planted records run as: sleep, each its own group
	var procs []*exec.Cmd
	b.Cleanup(func() {
		for _, p := range procs {
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			_, _ = p.Process.Wait()
		}
	})
	spawn := func() (pid int, start uint64) {
		cmd := exec.Command("sleep", "100000")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		procs = append(procs, cmd)
		st, _, err := isolate.ProcStat(cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		return cmd.Process.Pid, st
	}

	// real sandboxes of each class
	type planted struct{ id, owner string }
	var live, leaked, expired []planted
	var liveReal []*sandbox.Sandbox
	var manifests []*runmanifest.Manifest
	t0 := time.Now()
	for i := range real {
		s := w.create(b, pool, "g-1", fmt.Sprintf("r-live-%d", i))
		liveReal = append(liveReal, s)
		live = append(live, planted{s.ID, s.Owner})
		manifests = append(manifests, &runmanifest.Manifest{RunID: s.Owner, Pool: pool, SandboxID: s.ID, AllocationAttempt: 1, Status: runmanifest.StatusGranted})
	}
	var template map[string]any
	data, err := os.ReadFile(filepath.Join(sbDir, liveReal[0].ID, "sandbox.json"))
	if err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(data, &template); err != nil {
		b.Fatal(err)
	}
	delete(template, "cgroup")
	delete(template, "workspaceBytes")
	seq := 0
	plant := func(owner string, pid int, start uint64) string {
		seq++
		id := fmt.Sprintf("sb-b10%013x", seq)
		rec := map[string]any{}
		for k, v := range template {
			rec[k] = v
		}
		ref := map[string]any{"pid": pid, "start": start}
		rec["id"], rec["owner"], rec["bwrap"], rec["init"], rec["created"] = id, owner, ref, ref, time.Now().UTC()
		data, err := json.Marshal(rec)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(sbDir, id), 0o700); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sbDir, id, "sandbox.json"), data, 0o600); err != nil {
			b.Fatal(err)
		}
		return id
	}
	var pid int
	var start uint64
	for i := real; i < n; i++ {
		if (i-real)%50 == 0 {
			pid, start = spawn()
		}
		owner := fmt.Sprintf("r-live-%d", i)
		id := plant(owner, pid, start)
		live = append(live, planted{id, owner})
		manifests = append(manifests, &runmanifest.Manifest{RunID: owner, Pool: pool, SandboxID: id, AllocationAttempt: 1, Status: runmanifest.StatusGranted})
	}
	livePids := make([]*exec.Cmd, len(procs))
	copy(livePids, procs)
	storeAll(b, w.store, manifests)
	b.Logf("live: %d (%d real) in %s", len(live), real, time.Since(t0))

	// the reconciler runs before the leaks appear
	m, err := telemetry.NewMetrics()
	if err != nil {
		b.Fatal(err)
	}
	r, err := New(Config{Backend: w.backend, Runs: w.store, Records: w.records, Owner: "b10/127.0.0.1:0", Metrics: m,
		Warm: func() (map[string]map[string]bool, bool) {
			return map[string]map[string]bool{pool: {"g-1": true}}, true
		},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), Grace: min(DefaultGrace, interval)})
	if err != nil {
		b.Fatal(err)
	}
	var runWG sync.WaitGroup
	runWG.Go(func() { r.Run(ctx, interval) })

	// the leaks
	t1 := time.Now()
	manifests = manifests[:0]
	for i := range real {
		s := w.create(b, pool, "g-1", fmt.Sprintf("r-ghost-%d", i))
		leaked = append(leaked, planted{s.ID, s.Owner})
		s = w.create(b, pool, "g-1", fmt.Sprintf("r-done-%d", i))
		expired = append(expired, planted{s.ID, s.Owner})
		manifests = append(manifests, &runmanifest.Manifest{RunID: s.Owner, Pool: pool, SandboxID: s.ID, AllocationAttempt: 1, Status: runmanifest.StatusGranted})
	}
	for i := real; i < n; i++ {
		if (i-real)%50 == 0 {
			pid, start = spawn()
		}
		owner := fmt.Sprintf("r-done-%d", i)
		expired = append(expired, planted{plant(owner, pid, start), owner})
		manifests = append(manifests, &runmanifest.Manifest{RunID: owner, Pool: pool, SandboxID: expired[len(expired)-1].id, AllocationAttempt: 1, Status: runmanifest.StatusGranted})
	}
	storeAll(b, w.store, manifests)
	for _, mf := range manifests {
		if err := w.store.Update(ctx, mf.RunID, func(m *runmanifest.Manifest) error { m.Status = runmanifest.StatusReleased; return nil }); err != nil {
			b.Fatal(err)
		}
	}
	for i := real; i < n; i++ {
		owner := fmt.Sprintf("r-ghost-%d", i)
		if i%2 == 0 { // running
			if (i-real)%100 < 2 {
				pid, start = spawn()
			}
			leaked = append(leaked, planted{plant(owner, pid, start), owner})
		} else { // dead: its processes are gone (a pid that exited)
			leaked = append(leaked, planted{plant(owner, 1<<22-1, 1), owner})
		}
	}
	plantedAt := time.Now()
	b.Logf("leaks planted: %d leaked, %d expired leases in %s", len(leaked), len(expired), plantedAt.Sub(t1))

	// until every leak is gone
	leaks := map[string]bool{}
	for _, p := range append(append([]planted(nil), leaked...), expired...) {
		leaks[p.id] = true
	}
	deadline := plantedAt.Add(interval + 10*time.Second + 2*time.Minute)
	for {
		left := 0
		for id := range leaks {
			if _, err := os.Lstat(filepath.Join(sbDir, id)); err == nil {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d leaks left %s after the planting", left, time.Since(plantedAt))
		}
		time.Sleep(50 * time.Millisecond)
	}
	clean := time.Since(plantedAt)
	cancel()
	runWG.Wait()
	ctx = context.Background()

	// zero live touched
	have := w.sandboxes(b)
	touched := 0
	for _, p := range live {
		if s := have[p.id]; s == nil || s.State != sandbox.StateRunning || s.Owner != p.owner {
			touched++
		}
	}
	for _, s := range liveReal {
		alive(b, w, s)
	}
	for _, p := range livePids {
		if p.ProcessState != nil || syscall.Kill(p.Process.Pid, 0) != nil {
			touched++
		}
	}
	if touched > 0 {
		b.Fatalf("%d live sandboxes were touched", touched)
	}
	unknown, _ := w.records.Unknown(ctx)
	if len(unknown) > 0 {
		b.Fatalf("cleanup unknown: %v", unknown)
	}

	// steady state: passes with nothing to do
	const passes = 5
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	tp := time.Now()
	for range passes {
		rep, err := r.Pass(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(rep.Found) > 0 || rep.Live != n {
			b.Fatalf("steady pass: %+v", rep)
		}
	}
	wall := time.Since(tp) / passes
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := (tv(after.Utime) + tv(after.Stime) - tv(before.Utime) - tv(before.Stime)) / passes

	scrape := scrape100(b)
	b.ReportMetric(float64(n), "leaked")
	b.ReportMetric(float64(n), "expired_leases")
	b.ReportMetric(float64(n), "live")
	b.ReportMetric(interval.Seconds(), "interval_s")
	b.ReportMetric(clean.Seconds(), "clean_s")
	b.ReportMetric((interval + 10*time.Second).Seconds(), "target_s")
	b.ReportMetric(float64(touched), "live_touched")
	b.ReportMetric(cpu.Seconds(), "idle_cpu_s/pass")
	b.ReportMetric(cpu.Seconds()*float64(time.Minute/DefaultInterval), "idle_cpu_s/min@30s")
	b.ReportMetric(wall.Seconds(), "idle_pass_s")
	b.ReportMetric(float64(scrape.Microseconds())/1000, "scrape_100pools_ms")
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B10", What: fmt.Sprintf("%d leaked sandboxes and %d expired leases among %d live, reconciler at %v", n, n, n, interval),
		Slipway: fmt.Sprintf("all cleaned %.1f s after planting, %d live touched", clean.Seconds(), touched), NoPeer: true, Target: "under one interval + 10 s, 0 live touched", Met: clean <= interval+10*time.Second && touched == 0}))
}

func tv(t syscall.Timeval) time.Duration {
	return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
}

// storeAll records ms, several at a time (the store commits them in groups).
func storeAll(b *testing.B, st runs.Store, ms []*runmanifest.Manifest) {
	var wg sync.WaitGroup
	jobs := make(chan *runmanifest.Manifest)
	for range 16 {
		wg.Go(func() {
			for m := range jobs {
				if err := st.Create(context.Background(), m); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for _, m := range ms {
		jobs <- m
	}
	close(jobs)
	wg.Wait()
}

// scrape100 is the median time of a /metrics scrape of a runtime's metric
// set with 100 pools (every per-pool series set: claims, latencies, pool
// sizes, orphans, cleanup unknown).
func scrape100(b *testing.B) time.Duration {
	m, err := telemetry.NewMetrics(telemetry.WithEnvironment("bench"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var samples []telemetry.PoolSample
	for i := range 100 {
		p := fmt.Sprintf("pool-%03d", i)
		m.SandboxCreated(ctx, p, "g-1", true, 5*time.Millisecond)
		m.SandboxCreated(ctx, p, "g-1", false, 2*time.Second)
		m.Released(ctx, p, 100*time.Millisecond)
		m.Orphans(ctx, p, 0)
		m.CleanupUnknown(ctx, p, 0)
		samples = append(samples, telemetry.PoolSample{Pool: p, Warm: 10, Claimed: 5, Ready: 8, WarmTarget: 10})
	}
	if err := m.ObservePools(func(context.Context) ([]telemetry.PoolSample, error) { return samples, nil }); err != nil {
		b.Fatal(err)
	}
	h := m.Handler()
	var ds []time.Duration
	for range 21 {
		rec := httptest.NewRecorder()
		t := time.Now()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		ds = append(ds, time.Since(t))
		if rec.Code != 200 {
			b.Fatalf("scrape: %d", rec.Code)
		}
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}
