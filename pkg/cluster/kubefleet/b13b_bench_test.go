//go:build linux

package kubefleet_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
)

// phaseClock timestamps the driver's step lines ("ro-…: <step> (<status>)").
type phaseClock struct {
	mu    sync.Mutex
	steps []string
	at    []time.Time
}

func (c *phaseClock) Write(b []byte) (int, error) {
	line := strings.TrimSpace(string(b))
	if _, rest, ok := strings.Cut(line, ": "); ok && strings.HasPrefix(line, "ro-") {
		step, _, _ := strings.Cut(rest, " ")
		if step != "lease" {
			c.mu.Lock()
			c.steps, c.at = append(c.steps, step), append(c.at, time.Now())
			c.mu.Unlock()
		}
	}
	return len(b), nil
}

// BenchmarkB13bRollout is benchmark B13b's rollout half: on the local
// cluster (a real node, agent-sandbox's controller), a rollout g1 -> g2 of
// a pool whose warm pool holds 10 members (BENCH_SMOKE=1: 2), timed per
// phase: compatibility (the cluster answers), warm (g2's warm pool applied
// and all its members Ready), prove (the runtime on the Kubernetes
// backend: a proof claim on g2 and the checks through the runner in its
// pod), route (the routing commit applied and read back),
// drain (no run open on g1), remove (g1's warm members deleted and gone).
// Each phase's time is reported as s/<phase>, and the whole as s/rollout.
//
//	go test -run '^$' -bench B13b -benchtime 1x -timeout 30m ./pkg/cluster/kubefleet/
func BenchmarkB13bRollout(b *testing.B) {
	size := 10
	if os.Getenv("BENCH_SMOKE") != "" {
		size = 2
	}
	w := newWorld(b, "bench", size, func(s *pool.Spec) { deadlines(s, 10*time.Minute) }, blocking("g1"), blocking("g2"))
	w.syncReady(0, size, 10*time.Minute)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i > 0 {
			b.Fatal("one rollout per run: use -benchtime 1x")
		}
		clock := &phaseClock{}
		d := w.driver(w.fleet)
		d.Log = clock
		start := time.Now()
		r, err := d.Start(ctx, w.gens[1].ID, false)
		if err != nil {
			b.Fatal(err)
		}
		if r, err = d.Drive(ctx, r.ID); err != nil {
			b.Fatalf("rollout: %v (%+v)", err, r)
		}
		total := time.Since(start)
		b.StopTimer()
		prev, phase := start, rollout.PhaseCompatibility
		var table []string
		for j, step := range clock.steps {
			el := clock.at[j].Sub(prev)
			b.ReportMetric(el.Seconds(), "s/"+phase)
			table = append(table, fmt.Sprintf("%-13s %6.2fs", phase, el.Seconds()))
			prev, phase = clock.at[j], step
		}
		b.ReportMetric(total.Seconds(), "s/rollout")
		b.Logf("B13b rollout of a %d-member warm pool, per phase:\n%s\n%-13s %6.2fs", size, strings.Join(table, "\n"), "total", total.Seconds())
	}
}
