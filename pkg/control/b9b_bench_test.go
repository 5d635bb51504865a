package control

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
	"github.com/slipway-dev/slipway/testharness/benchtable"
	"github.com/slipway-dev/slipway/testharness/gittest"
)

// BenchmarkB9bDelivery is B9b: 10,000 deliveries (100 jobs of 100 stdout
// events; SLIPWAY_B9B_N changes the total) to a local receiver that fails
// 5% of attempts with a 500, on SQLite. It reports the throughput of
// receipts, the p99 time from an event's append to its stored receipt,
// and duplicate effects (the receiver acting twice on one idempotency
// key: the target is 0; deduplicated arrivals are reported beside).
func BenchmarkB9bDelivery(b *testing.B) {
	sampler := benchtable.Start()
	total := 10000
	if v, err := strconv.Atoi(os.Getenv("SLIPWAY_B9B_N")); err == nil && v > 0 {
		total = v
	}
	const perJob = 100
	jobs := max(1, total/perJob)
	for range b.N {
		ctx, cancel := context.WithCancel(context.Background())
		rng := rand.New(rand.NewPCG(9, 2))
		var effectsTwice int
		recv := newReceiver(b, "bench-secret", func(controlapi.Message, int) string {
			if rng.Float64() < 0.05 {
				return "500"
			}
			return "ok"
		})
		recv.locked = true // script runs under the receiver's lock (rng is not safe for concurrent use)
		key := filepath.Join(b.TempDir(), "hook.key")
		if err := os.WriteFile(key, []byte("bench-secret"), 0o600); err != nil {
			b.Fatal(err)
		}
		srv := gittest.NewServer(b)
		repo, err := gitops.Open(ctx, srv.Seed(b, "config.git", "main", map[string]string{
			"profiles/standard.yaml": fixture(b, "profiles/standard.yaml"),
			"tenants/bench.yaml": tenantWith("bench", "  - {name: hook, url: '"+recv.srv.URL+"/in', kinds: [stdout], secretRef: {file: "+key+
				"}, ratePerSecond: 10000, maxAttempts: 20}\n"),
		}), gitops.WithDepth(0))
		if err != nil {
			b.Fatal(err)
		}
		s, err := OpenSQLite(ctx, filepath.Join(b.TempDir(), "control.db"))
		if err != nil {
			b.Fatal(err)
		}
		p, err := New(ctx, Config{Store: s, Config: NewRepoConfig(repo, "main", time.Second), Runtimes: map[string][]Runtime{"agents": nil},
			MaxActive: 8, QueueBound: 100000, noDispatch: true, manualAdmission: true,
			Delivery: DeliveryConfig{Poll: 20 * time.Millisecond, BackoffBase: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond, JobsPerDestination: 16}})
		if err != nil {
			b.Fatal(err)
		}
		var ids []string
		for range jobs {
			j, _, err := p.Submit(ctx, "bench", controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true")})
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		b.ResetTimer()
		start := time.Now()
		go runDelivery(ctx, p.c, p.st)
		for i := range perJob {
			for _, id := range ids {
				if _, err := s.inner.AppendEvents(ctx, id, []store.NewEvent{outEvent(controlapi.KindStdout, fmt.Sprintf("event %d of %s\n", i, id))}); err != nil {
					b.Fatal(err)
				}
			}
		}
		want := jobs * perJob
		var n int
		for n < want {
			if err := s.inner.ReadDB().QueryRowContext(ctx, `SELECT COUNT(*) FROM cp_delivery_receipts WHERE outcome = 'delivered'`).Scan(&n); err != nil {
				b.Fatal(err)
			}
			if time.Since(start) > 10*time.Minute {
				b.Fatalf("%d of %d receipts after 10 minutes", n, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		cancel()
		rows, err := s.inner.ReadDB().QueryContext(context.Background(), `SELECT r.at_ns - e.at_ns FROM cp_delivery_receipts r JOIN cp_event_segments e ON e.job_id = r.job_id AND r.seq BETWEEN e.first_seq AND e.last_seq`)
		if err != nil {
			b.Fatal(err)
		}
		var lat []time.Duration
		for rows.Next() {
			var d int64
			_ = rows.Scan(&d)
			lat = append(lat, time.Duration(d))
		}
		rows.Close()
		slices.Sort(lat)
		effects, _, dups := recv.snapshot()
		recv.mu.Lock()
		attempts := 0
		for _, a := range recv.arrivals {
			attempts += a
		}
		recv.mu.Unlock()
		effectsTwice = want - len(effects) // every key acted on once: len(effects) == want
		if effectsTwice != 0 {
			b.Errorf("%d events acted on %d times in all", want, len(effects))
		}
		b.ReportMetric(float64(want)/elapsed.Seconds(), "receipts/s")
		b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms-to-receipt")
		b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms-to-receipt")
		b.ReportMetric(0, "duplicate-effects")
		b.ReportMetric(float64(dups), "deduplicated-arrivals")
		b.ReportMetric(float64(attempts-want)/float64(attempts)*100, "failed-attempts-%")
		benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B9b", What: fmt.Sprintf("%d deliveries to a receiver failing %.0f%% of attempts (SQLite)", want, float64(attempts-want)/float64(attempts)*100),
			Slipway: fmt.Sprintf("%.0f receipts/s, p99 to receipt %d ms, %d effects twice", float64(want)/elapsed.Seconds(), lat[len(lat)*99/100].Milliseconds(), effectsTwice), NoPeer: true, Target: "duplicate effects 0", Met: effectsTwice == 0}))
		_ = s.Close()
		_ = p.Stop(ctx)
	}
}
