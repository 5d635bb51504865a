package control

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/gitops"
	"github.com/slipway-dev/slipway/pkg/gittest"
	"github.com/slipway-dev/slipway/pkg/pgtest"
)

// benchRepo is a config repository with n tenants t0..t(n-1) whose queues
// hold a benchmark's jobs, one profile and no prices.
func benchRepo(b *testing.B, n, concurrency int) *gitops.Repo {
	b.Helper()
	files := map[string]string{"profiles/standard.yaml": profileStandard}
	for i := range n {
		files[fmt.Sprintf("tenants/t%d.yaml", i)] = fmt.Sprintf(`apiVersion: slipway.dev/v1alpha1
kind: Tenant
name: t%d
pools: [agents]
profiles: [standard]
concurrency: %d
queueBound: 1000000
`, i, concurrency)
	}
	srv := gittest.NewServer(b)
	repo, err := gitops.Open(context.Background(), srv.Seed(b, "config.git", "main", files), gitops.WithDepth(0))
	if err != nil {
		b.Fatal(err)
	}
	return repo
}

func benchStore(b *testing.B, kind string) *Store {
	b.Helper()
	var s *Store
	var err error
	if kind == "sqlite" {
		s, err = OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "control.db"))
	} else {
		s, err = OpenPostgres(context.Background(), pgtest.New(b))
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// concurrently runs n calls of f on clients goroutines and returns each
// call's latency.
func concurrently(b *testing.B, n, clients int, f func(i int) error) ([]time.Duration, time.Duration) {
	b.Helper()
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t := time.Now()
				if err := f(i); err != nil {
					failed.Store(err)
					return
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return lat, time.Since(start)
}

func pct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkB8aSubmit: 50 clients submit b.N jobs over HTTP to a control
// plane whose admitted jobs go to a null dispatcher, beside the same number
// of inserts made directly through River at the same concurrency (the
// floor). Run with -benchtime=20000x for the figure.
func BenchmarkB8aSubmit(b *testing.B) {
	const clients = 50
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			repo := benchRepo(b, 1, 64)
			ctx := context.Background()
			// The floor: River's own inserts.
			fs := benchStore(b, kind)
			q, err := openQueue(ctx, fs, queueConfig{workers: 1, maxAttempts: 5}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer q.close()
			floor, floorWall := concurrently(b, b.N, clients, func(i int) error { return q.insert(ctx, fmt.Sprint("floor-", i)) })

			s := benchStore(b, kind)
			p, err := New(ctx, Config{Store: s, Config: NewRepoConfig(repo, "main", time.Minute), Runtimes: map[string][]Runtime{"agents": nil},
				MaxActive: 64, QueueBound: 10_000_000, noDispatch: true, nullDispatch: func(string) {}})
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Start(ctx); err != nil {
				b.Fatal(err)
			}
			defer p.Stop(ctx)
			srv := httptest.NewServer(NewServer(p))
			defer srv.Close()
			tok, _, err := s.CreateToken(ctx, "t0", ScopeTenant, "")
			if err != nil {
				b.Fatal(err)
			}
			c, _ := NewClient(srv.URL, tok)
			c.http.Transport = newTransport(clients)
			b.ResetTimer()
			lat, wall := concurrently(b, b.N, clients, func(i int) error {
				_, _, err := c.Submit(ctx, Spec{Pool: "agents", Profile: "standard", Commands: cmd("true"), IdempotencyKey: fmt.Sprint("k", i)})
				return err
			})
			b.StopTimer()
			rate, floorRate := float64(b.N)/wall.Seconds(), float64(b.N)/floorWall.Seconds()
			b.ReportMetric(rate, "jobs/s")
			b.ReportMetric(floorRate, "river-jobs/s")
			b.ReportMetric(floorRate/rate, "overhead-x")
			b.ReportMetric(float64(pct(lat, 0.5).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(pct(lat, 0.99).Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(pct(floor, 0.5).Microseconds())/1000, "river-p50-ms")
			b.ReportMetric(float64(pct(floor, 0.99).Microseconds())/1000, "river-p99-ms")
		})
	}
}
