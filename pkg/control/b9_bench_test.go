package control

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
	"github.com/slipway-dev/slipway/testharness/benchtable"
	"github.com/slipway-dev/slipway/testharness/need"
)

// b9Size is B9a's shape: runs, events per run, bytes per event (BENCH_SMOKE:
// seconds; SLIPWAY_B9A_EVENTS sets the events per run). Closed-loop, 1,000
// events a run (200,000 in all) hold each side at its steady rate for tens
// of seconds; 5,000, the open-loop figure's, took Slipway over two minutes.
func b9Size() (runs, events, size int) {
	if os.Getenv("BENCH_SMOKE") != "" {
		return 4, 100, 200
	}
	events = 1000
	if n, err := strconv.Atoi(os.Getenv("SLIPWAY_B9A_EVENTS")); err == nil && n > 0 {
		events = n // events per run, for a shorter run
	}
	return 200, events, 200
}

// stamped is an event's payload: its write time in hex, padded to size.
func stamped(size int) []byte { return stampedAt(time.Now(), size) }

// stampedAt is an event's payload stamped with at: a paced writer stamps
// the time the event was due, so an event written late (the writer held
// back) counts its lateness.
func stampedAt(at time.Time, size int) []byte {
	b := make([]byte, size)
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], uint64(at.UnixNano()))
	hex.Encode(b, t[:])
	for i := 16; i < size-1; i++ {
		b[i] = 'x'
	}
	b[size-1] = '\n'
	return b
}

func stampOf(b []byte) (time.Time, bool) {
	var t [8]byte
	if len(b) < 16 {
		return time.Time{}, false
	}
	if _, err := hex.Decode(t[:], b[:16]); err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(t[:]))), true
}

// BenchmarkB9aEvents: 200 concurrent runs each writing 1,000 events of 200
// bytes, from the write to an SSE client's read, beside NATS JetStream
// (embedded, file storage, a subject per run, an ordered consumer per run)
// carrying the same events in the same run. Both sides are closed-loop:
// each writer waits for its event's acknowledgement before the next (on
// Slipway the store's group append, the commit that Output.flush waits for;
// on JetStream a synchronous Publish and its PubAck). Throughput is events
// written and read per second; latency is write (or, paced, due) to read.
//
// Durability cannot be equal at every size, so the benchmark prints each
// side's setting beside its figures: SQLite runs synchronous=FULL (an fsync
// of the WAL per group commit); JetStream by default syncs its file store
// every two minutes; with sync_always it fsyncs every write, which makes a
// full-size run take many minutes, so the equal-fsync pair (sqlite-fsync and
// jetstream-sync-always) runs 100 events per run, both sides the same.
// PostgreSQL is testharness/pgtest's, fsync off.
//
// Then (the -paced runs) the writers are paced together at half the
// throughput JetStream reached flat out, each event stamped with the time
// it was due, and SQLite and JetStream report their latency at that same
// offered load (SLIPWAY_B9A_RATE sets another rate). Target: Slipway's p99
// under 50 ms, with the load average and steal time beside it.
func BenchmarkB9aEvents(b *testing.B) {
	type fig struct {
		rate     float64
		p50, p99 time.Duration
	}
	figs := map[string]fig{}
	sampler := benchtable.Start()
	report := func(b *testing.B, name string, lat []time.Duration, total int, wall time.Duration) float64 {
		rate := float64(total) / wall.Seconds()
		b.ReportMetric(rate, "events/s")
		b.ReportMetric(float64(pct(lat, 0.5).Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(pct(lat, 0.99).Microseconds())/1000, "p99-ms")
		figs[name] = fig{rate, pct(lat, 0.5), pct(lat, 0.99)}
		return rate
	}
	slipway := func(name, kind string, events int, every func() time.Duration) {
		b.Run(name, func(b *testing.B) {
			runtime.GC() // what the sub-benchmark before left is not this one's to collect
			runs, _, size := b9Size()
			ev := every()
			if ev < 0 {
				b.Skip("paced at half JetStream's flat-out throughput: run B9a/jetstream in the same run (or set SLIPWAY_B9A_RATE)")
			}
			var lat []time.Duration
			var wall time.Duration
			for range b.N {
				l, w := b9Slipway(b, kind, runs, events, size, ev)
				lat, wall = append(lat, l...), wall+w
			}
			report(b, name, lat, b.N*runs*events, wall)
		})
	}
	peer := func(name string, events int, syncAlways bool, every func() time.Duration) {
		b.Run(name, func(b *testing.B) {
			runtime.GC()
			runs, _, size := b9Size()
			ev := every()
			if ev < 0 {
				b.Skip("paced at half JetStream's flat-out throughput: run B9a/jetstream in the same run (or set SLIPWAY_B9A_RATE)")
			}
			var total int64
			var wall time.Duration
			var p50, p99 []time.Duration
			for range b.N {
				r := b9JetStream(b, runs, events, size, ev, syncAlways)
				total, wall = total+r.Events, wall+time.Duration(r.WallNS)
				p50, p99 = append(p50, time.Duration(r.P50NS)), append(p99, time.Duration(r.P99NS))
			}
			rate := float64(total) / wall.Seconds()
			b.ReportMetric(rate, "events/s")
			b.ReportMetric(float64(pct(p50, 0.5).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(pct(p99, 0.5).Microseconds())/1000, "p99-ms")
			figs[name] = fig{rate, pct(p50, 0.5), pct(p99, 0.5)}
		})
	}
	runs, events, _ := b9Size()
	syncEvents := min(events, 100)
	flat := func() time.Duration { return 0 }
	paced := func() time.Duration {
		rate := figs["jetstream"].rate / 2
		if r, err := strconv.ParseFloat(os.Getenv("SLIPWAY_B9A_RATE"), 64); err == nil && r > 0 {
			rate = r // events/s of all writers, to chart latency against load
		}
		if rate == 0 {
			return -1
		}
		return time.Duration(float64(runs) / rate * float64(time.Second)) // one writer's interval
	}
	// Interleaved: Slipway, JetStream, Slipway, JetStream.
	slipway("sqlite", "sqlite", events, flat)
	peer("jetstream", events, false, flat)
	slipway("sqlite-fsync", "sqlite", syncEvents, flat)
	peer("jetstream-sync-always", syncEvents, true, flat)
	slipway("postgres", "postgres", events, flat)
	peer("jetstream-paced", events, false, paced)
	slipway("sqlite-paced", "sqlite", events, paced)

	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	row := func(bench, what, settings, a, bb string, byRate bool, target string, met func(fig) bool) {
		sf, ok1 := figs[a]
		pf, ok2 := figs[bb]
		if !ok1 || !ok2 {
			return
		}
		ratio := sf.p99.Seconds() / pf.p99.Seconds()
		if byRate {
			ratio = sf.rate / pf.rate
		}
		fmt.Printf("B9a %s: %s %.0f events/s p50 %s p99 %s; %s %.0f events/s p50 %s p99 %s; ratio %.2fx (%s)\n", bench,
			a, sf.rate, ms(sf.p50), ms(sf.p99), bb, pf.rate, ms(pf.p50), ms(pf.p99), ratio, settings)
		r := benchtable.Row{Bench: "B9a " + bench, What: what,
			Slipway: fmt.Sprintf("%.0f events/s, p99 %s", sf.rate, ms(sf.p99)),
			Peer:    fmt.Sprintf("JetStream %.0f events/s, p99 %s", pf.rate, ms(pf.p99)),
			Ratio:   ratio, Settings: settings, Target: target}
		if met != nil {
			r.Met = met(sf)
		}
		benchtable.Emit(b, sampler.Finish(r))
	}
	smoke := ""
	if os.Getenv("BENCH_SMOKE") != "" {
		smoke = "smoke: "
	}
	under50 := func(f fig) bool { return f.p99 < 50*time.Millisecond }
	row("flat out", fmt.Sprintf("%s%d runs x %d events of 200 B, closed-loop, flat out (ratio: throughput)", smoke, runs, events),
		"SQLite synchronous=FULL; JetStream file store synced every 2 min (default)", "sqlite", "jetstream", true, "p99 < 50 ms", under50)
	row("equal fsync", fmt.Sprintf("%s%d runs x %d events, closed-loop, flat out (ratio: throughput)", smoke, runs, syncEvents),
		"SQLite synchronous=FULL (fsync per group commit); JetStream sync_always (fsync per write)", "sqlite-fsync", "jetstream-sync-always", true, "", nil)
	row("paced", fmt.Sprintf("%s%d runs x %d events, closed-loop, paced at half JetStream's flat-out rate (ratio: p99)", smoke, runs, events),
		"SQLite synchronous=FULL; JetStream synced every 2 min (default)", "sqlite-paced", "jetstream-paced", false, "p99 < 50 ms", under50)
}

// b9Writer writes events payloads with write: flat out (every 0), or
// paced, writer i of runs writing event k when start + (i/runs + k) *
// every is due, stamped with that time.
func b9Writer(start time.Time, i, runs, events, size int, every time.Duration, write func([]byte)) {
	for k := range events {
		if every == 0 {
			write(stamped(size))
			continue
		}
		due := start.Add(every*time.Duration(k) + every*time.Duration(i)/time.Duration(runs))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		write(stampedAt(due, size))
	}
}

const b9Profile = `apiVersion: slipway.dev/v1alpha1
kind: Profile
name: standard
network:
  mode: deny
maxDuration: 2m
output:
  maxBytes: 268435456
  maxLines: 100000000
`

// b9Slipway runs the events through the control plane: jobs admitted (no
// runtime), an output stream per job written as a runner's output arrives
// (ChunkBytes = the event size: one event per write), and an SSE follower
// per job.
func b9Slipway(b *testing.B, kind string, runs, events, size int, every time.Duration) ([]time.Duration, time.Duration) {
	b.Helper()
	ctx := context.Background()
	b.StopTimer()
	repo := benchRepoWith(b, 1, runs, b9Profile)
	s := benchStore(b, kind)
	p, err := New(ctx, Config{Store: s, Config: NewRepoConfig(repo, "main", time.Minute), Runtimes: map[string][]Runtime{"agents": nil},
		MaxActive: runs, QueueBound: 1_000_000, noDispatch: true, Events: EventConfig{ChunkBytes: size, MaxBytesPerJob: 1 << 30, InFlightBytes: b9InFlight()}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Stop(context.Background())
	srv := httptest.NewServer(NewServer(p))
	defer srv.Close()
	tok, _, err := s.CreateToken(ctx, "t0", controlapi.ScopeTenant, "")
	if err != nil {
		b.Fatal(err)
	}
	c, _ := controlapi.NewClient(srv.URL, tok, controlapi.WithHTTPClient(&http.Client{Transport: newTransport(runs * 2)}))
	jobs := make([]*controlapi.Job, runs)
	for i := range jobs {
		if jobs[i], _, err = p.Submit(ctx, "t0", controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true"), IdempotencyKey: fmt.Sprint(i)}); err != nil {
			b.Fatal(err)
		}
	}
	lats := make([][]time.Duration, runs)
	var wg, ready sync.WaitGroup
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var got atomic.Int64
	for i, j := range jobs {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			n, once := 0, sync.Once{}
			err := c.Follow(fctx, j.ID, controlapi.FollowOptions{}, func(e controlapi.Event) error {
				once.Do(ready.Done)
				if e.Kind != controlapi.KindStdout {
					return nil
				}
				d, err := e.Output()
				if err != nil {
					return err
				}
				if t, ok := stampOf(d.Bytes()); ok {
					lats[i] = append(lats[i], time.Since(t))
				}
				n++
				got.Add(1)
				if n == events {
					return errB9Done
				}
				return nil
			})
			if err != nil && err != errB9Done && fctx.Err() == nil {
				b.Error(err)
			}
		}()
	}
	ready.Wait() // every follower has read the job's first event
	b.StartTimer()
	start := time.Now()
	var wwg sync.WaitGroup
	for i, j := range jobs {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			// Closed-loop: the append Output.flush makes, one event at a
			// time, waiting for its group commit.
			b9Writer(start, i, runs, events, size, every, func(ev []byte) {
				if _, err := p.st.AwaitAppend(ctx, p.st.EnqueueAppend(j.ID, []store.NewEvent{{Kind: controlapi.KindStdout, Data: store.TextOutputJSON(0, ev)}})); err != nil {
					b.Error(err)
				}
			})
		}()
	}
	wwg.Wait()
	wg.Wait()
	wall := time.Since(start)
	b.StopTimer()
	if got.Load() != int64(runs*events) {
		b.Fatalf("read %d events, want %d", got.Load(), runs*events)
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	return all, wall
}

var errB9Done = fmt.Errorf("all events read")

// b9InFlight is EventConfig.InFlightBytes for B9a: SLIPWAY_B9A_INFLIGHT
// bytes, else the default (0).
func b9InFlight() int {
	n, _ := strconv.Atoi(os.Getenv("SLIPWAY_B9A_INFLIGHT"))
	return n
}

// b9Peer is what the JetStream peer reports of one run.
type b9Peer struct {
	Events int64 `json:"events"`
	WallNS int64 `json:"wall_ns"`
	P50NS  int64 `json:"p50_ns"`
	P99NS  int64 `json:"p99_ns"`
}

// b9JetStream carries the same events through an embedded NATS server with
// JetStream on file storage (a subject per run, synchronous publishes each
// waiting for its acknowledgement, an ordered consumer per run; syncAlways:
// an fsync per write): the program $JETSTREAM_PEER
// (bench/jetstream, a module of its own so that nats-server stays out of
// Slipway's go.mod; make bench builds it), run here in the same benchmark,
// with the same runs, events, size and pace, its stamps made and read the
// same way.
func b9JetStream(b *testing.B, runs, events, size int, every time.Duration, syncAlways bool) b9Peer {
	b.Helper()
	bin := os.Getenv("JETSTREAM_PEER")
	if bin == "" {
		need.Missing(b, "JETSTREAM_PEER, the JetStream peer program (make bench builds bin/jetstream-peer)")
	}
	b.StopTimer()
	cmd := exec.Command(bin, "-runs", strconv.Itoa(runs), "-events", strconv.Itoa(events), "-size", strconv.Itoa(size),
		"-every", every.String(), "-store", b.TempDir(), "-closed", "-sync-always="+strconv.FormatBool(syncAlways))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("%s: %v: %s", bin, err, stderr.Bytes())
	}
	var res b9Peer
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("%s printed %q: %v", bin, out, err)
	}
	if res.Events != int64(runs*events) {
		b.Fatalf("JetStream's consumers read %d of %d events", res.Events, runs*events)
	}
	return res
}
