package runtime_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/isolate"
	"github.com/slipway-dev/slipway/pkg/isolate/shape"
	"github.com/slipway-dev/slipway/testharness/benchtable"
)

// BenchmarkB6ClaimLatency is benchmark B6: with a warm pool of 50 ready
// sandboxes, 200 concurrent claims through Runtime.Claim on the local
// (bubblewrap) backend, with a real runner, a busybox template from the
// in-process registry and run manifests in a SQLite store on disk. Each
// claim is timed from the call to its return; the latencies are split by
// Grant.Warm and printed as p50 and p99 for warm hits and for cold starts
// on a line starting "B6". Target: p99 of the warm hits under 20 ms.
//
// The peer of the cold starts: as many bare bubblewrap starts of the same
// template at once as Slipway makes cold (pkg/isolate with the local
// backend's options: the extracted template root read-only, the runner
// bound in, a workspace, the credential tmpfs; the image's environment is
// not read: PATH and HOME only), each timed to its runner's answer, before
// and after the claims; the ratio of the p50s is printed.
//
//	go test -run '^$' -bench B6 -benchtime 1x -timeout 30m ./pkg/execution/runtime/              # full
//	BENCH_SMOKE=1 go test -run '^$' -bench B6 -benchtime 1x ./pkg/execution/runtime/            # seconds
func BenchmarkB6ClaimLatency(b *testing.B) {
	warmSize, claims := 50, 200
	if os.Getenv("BENCH_SMOKE") != "" {
		warmSize, claims = 10, 40
	}
	const target = 20 * time.Millisecond
	ctx := context.Background()
	w := newWarmWorld(b)
	beDir := b.TempDir()
	be := newLocalBackendAt(b, beDir)
	sampler := benchtable.Start()
	store := newStore(b)
	g1 := w.generation(b, nil)
	d := w.desired(b, "rev-b6", warmSize, g1)
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(b.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute)
	defer rt.Close()

	var warmLat, coldLat, bareLat []time.Duration
	for b.Loop() {
		b.StopTimer()
		fillWarm(b, ctx, warm, be, d, g1.ID, warmSize)
		// The peer, before and after Slipway's claims: as many bare
		// bubblewrap starts of the same template as Slipway makes cold.
		bare := newBareStarter(b, ctx, be, beDir, g1.ID)
		bareLat = append(bareLat[:0], bare.storm(b, claims-warmSize)...)
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
		b.StartTimer()
		close(start)
		done.Wait()
		b.StopTimer()

		warmLat, coldLat = warmLat[:0], coldLat[:0]
		var failed []error
		for i, g := range grants {
			switch {
			case errs[i] != nil:
				failed = append(failed, errs[i])
			case g.Warm:
				warmLat = append(warmLat, lat[i])
			default:
				coldLat = append(coldLat, lat[i])
			}
		}
		// Release every claim (not timed): their sandboxes are deleted.
		var rel sync.WaitGroup
		sem := make(chan struct{}, 16)
		for _, g := range grants {
			if g == nil {
				continue
			}
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
		if len(failed) > 0 {
			b.Fatalf("%d of %d claims failed; first: %v", len(failed), claims, failed[0])
		}
		if len(warmLat) != warmSize || len(coldLat) != claims-warmSize {
			b.Fatalf("%d warm hits and %d cold starts, want %d and %d", len(warmLat), len(coldLat), warmSize, claims-warmSize)
		}
		bareLat = append(bareLat, bare.storm(b, claims-warmSize)...)
		b.StartTimer()
	}

	wp50, wp99 := percentile(warmLat, 50), percentile(warmLat, 99)
	cp50, cp99 := percentile(coldLat, 50), percentile(coldLat, 99)
	b.ReportMetric(ms(wp50), "warm-p50-ms")
	b.ReportMetric(ms(wp99), "warm-p99-ms")
	b.ReportMetric(ms(cp50), "cold-p50-ms")
	b.ReportMetric(ms(cp99), "cold-p99-ms")
	verdict := "MET"
	if wp99 >= target {
		verdict = "MISSED"
	}
	fmt.Printf("B6: warm pool %d, %d concurrent claims (Runtime.Claim, local bubblewrap backend, SQLite run store)\n", warmSize, claims)
	fmt.Printf("B6: warm hits:   n=%-3d p50=%8.2fms p99=%8.2fms max=%8.2fms  (target p99 < %v: %s)\n",
		len(warmLat), ms(wp50), ms(wp99), ms(percentile(warmLat, 100)), target, verdict)
	fmt.Printf("B6: cold starts: n=%-3d p50=%8.2fms p99=%8.2fms max=%8.2fms\n",
		len(coldLat), ms(cp50), ms(cp99), ms(percentile(coldLat, 100)))
	bp50, bp99 := percentile(bareLat, 50), percentile(bareLat, 99)
	b.ReportMetric(ms(bp50), "bare-bwrap-p50-ms")
	b.ReportMetric(ms(cp50)/ms(bp50), "cold/bare-p50")
	fmt.Printf("B6: bare bwrap:  n=%-3d p50=%8.2fms p99=%8.2fms max=%8.2fms  (%d at once, twice: before and after the claims; cold p50 %.2fx bare)\n",
		len(bareLat), ms(bp50), ms(bp99), ms(percentile(bareLat, 100)), claims-warmSize, ms(cp50)/ms(bp50))
	smoke := ""
	if os.Getenv("BENCH_SMOKE") != "" {
		smoke = "smoke: "
	}
	what := fmt.Sprintf("%swarm pool %d, %d concurrent claims (bubblewrap, SQLite)", smoke, warmSize, claims)
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B6 warm", What: what,
		Slipway: fmt.Sprintf("warm p99 %.1f ms", ms(wp99)), Peer: "none (a warm hit has no bare counterpart)", NoPeer: true, Target: "p99 < 20 ms", Met: wp99 < target}))
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B6 cold", What: what,
		Slipway: fmt.Sprintf("cold p50 %.0f ms, p99 %.0f ms", ms(cp50), ms(cp99)),
		Peer:    fmt.Sprintf("bare bwrap start of the same template to the runner's answer: p50 %.0f ms, p99 %.0f ms", ms(bp50), ms(bp99)),
		Ratio:   ms(cp50) / ms(bp50),
		Settings: "the same bwrap options (read-only template root, runner bind, workspace, credential tmpfs, namespaces, cap-drop ALL); " +
			"the bare start skips Slipway's records, workspace seed, refresh mounts, identity checks, owner swap and run manifest"}))
}

// newLocalBackendAt is newLocalBackend in dir (the bare starts read the
// template's extracted root and the runner's copy from it).
func newLocalBackendAt(t testing.TB, dir string) *local.Backend {
	t.Helper()
	be, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		all, _ := be.List(ctx, sandbox.Filter{})
		for _, s := range all {
			be.Delete(ctx, s.ID)
		}
		be.Close()
	})
	return be
}

// bareStarter starts B6's template as bare bubblewrap sandboxes: the local
// backend's bwrap options (pkg/isolate) for the same extracted template
// root and runner, the runner serving on a socket the host listens on, and
// nothing else. A start is done when the runner answers its identity.
type bareStarter struct {
	ctx                   context.Context
	root, runner, gen, wd string
	env                   isolate.Env
}

func newBareStarter(b *testing.B, ctx context.Context, be *local.Backend, beDir, gen string) *bareStarter {
	b.Helper()
	roots, _ := filepath.Glob(filepath.Join(beDir, "templates", "*", "rootfs"))
	runners, _ := filepath.Glob(filepath.Join(beDir, "runners", "*", "slipway-runner"))
	if len(roots) != 1 || len(runners) != 1 {
		b.Fatalf("the backend holds %d template roots and %d runners, want one each", len(roots), len(runners))
	}
	members, err := be.List(ctx, sandbox.Filter{Pool: "agents", Generation: gen})
	if err != nil || len(members) == 0 {
		b.Fatalf("no warm member to read the workdir from: %v", err)
	}
	wd := members[0].Workdir
	return &bareStarter{ctx: ctx, root: roots[0], runner: runners[0], gen: gen, wd: wd, env: shape.Env(nil, wd, nil)}
}

// storm starts n bare sandboxes at once and returns each one's time from
// its start to its runner's answer; they are stopped afterwards.
func (s *bareStarter) storm(b *testing.B, n int) []time.Duration {
	b.Helper()
	base, err := os.MkdirTemp("", "b6bare")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(base)
	lat := make([]time.Duration, n)
	procs := make([]*isolate.Process, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	for i := range n {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			t0 := time.Now()
			procs[i], errs[i] = s.start(base, fmt.Sprintf("bare-%d", i))
			lat[i] = time.Since(t0)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	for i, p := range procs {
		if p != nil {
			p.Kill()
			p.Wait()
		}
		if errs[i] != nil {
			b.Fatalf("bare bwrap start %d of %d: %v", i, n, errs[i])
		}
	}
	return lat
}

func (s *bareStarter) start(base, id string) (*isolate.Process, error) {
	dir := filepath.Join(base, id)
	ws := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "r.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false) // the socket outlives this listener: bwrap gets its descriptor
	f, err := ln.File()
	ln.Close()
	if err != nil {
		return nil, err
	}
	defer f.Close() // the sandbox has its own copy once started
	p, err := isolate.Start(context.Background(), isolate.Spec{
		Root: s.root, ReadOnlyRoot: true,
		Mounts: []isolate.Mount{{Source: s.runner, Target: sandbox.RunnerPath, ReadOnly: true}, {Source: ws, Target: s.wd}},
		Tmpfs:  []string{sandbox.CredentialDir},
		Env:    s.env, Dir: s.wd, Hostname: id,
		Argv:  []string{sandbox.RunnerPath, "serve", "--listen-fd", "0", "--generation", s.gen, "--sandbox", id, "--workdir", s.wd},
		Stdin: f,
	}, io.Discard, io.Discard)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	c := runner.NewClient(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	})
	who, err := c.Identity(ctx)
	if err != nil {
		return p, fmt.Errorf("the runner did not answer: %w", err)
	}
	if who.Generation != s.gen {
		return p, fmt.Errorf("the runner says generation %q, want %q", who.Generation, s.gen)
	}
	return p, nil
}

// fillWarm reconciles until the pool holds n ready warm members of gen.
func fillWarm(tb testing.TB, ctx context.Context, warm *runtime.Warm, be sandbox.Backend, d *runtime.Desired, gen string, n int) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		ready, err := be.List(ctx, sandbox.Filter{Pool: "agents", Generation: gen, Owner: sandbox.OwnerWarm, State: sandbox.StateRunning})
		if err != nil {
			tb.Fatal(err)
		}
		if len(ready) >= n {
			// One more pass, as the runtime's loop makes every 500 ms: it
			// pings the members whose runner was not heard from lately.
			warm.Reconcile(ctx, d)
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the warm pool has %d ready members after 5 minutes, want %d", len(ready), n)
		}
		if rep := warm.Reconcile(ctx, d); len(rep.Errors) > 0 {
			tb.Logf("reconcile: %v", rep.Errors)
		}
	}
}

// percentile is the nearest-rank p-th percentile of ds (0 when empty).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	k := (p*len(s) + 99) / 100 // ceil(p/100 * n)
	return s[max(0, min(len(s), k)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
