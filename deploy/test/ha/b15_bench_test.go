//go:build linux

package ha_test

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/deploy/internal/harness"
	"github.com/slipway-dev/slipway/pkg/execution/leader"
	"github.com/slipway-dev/slipway/testharness/benchtable"
)

// BenchmarkB15 is benchmark B15: the HA install (overlays/ha, two
// replicas of each plane) on the test node with 50 jobs in flight; one
// control-plane pod and one runtime pod deleted (of each plane the replica
// whose log names a running job's run), as TestInClusterHAJobs does with
// 10. Target: 0 jobs lost (each ends terminal or visibly unknown with an
// owner and a deadline), 0 run twice, the next job admitted within the
// lease (the runtime's Lease, leader.DefaultLeaseDuration, 15 s) plus 5 s
// of the deletion. One deletion a run: the figure is that one time, not a
// percentile. BENCH_SMOKE=1: 10 jobs.
func BenchmarkB15(b *testing.B) {
	jobs := 50
	smoke := ""
	if os.Getenv("BENCH_SMOKE") != "" {
		jobs, smoke = 10, "smoke: "
	}
	for b.Loop() {
		sampler := benchtable.Start()
		r := harness.HADeletion(b, jobs, harness.OnePodOfEach)
		within := leader.DefaultLeaseDuration + 5*time.Second
		next := "no job admitted after the deletion"
		if r.Next >= 0 {
			next = fmt.Sprintf("next job admitted %s after the deletion", r.Next.Round(10*time.Millisecond))
		}
		var states []string
		for s, n := range r.ByState {
			states = append(states, fmt.Sprintf("%s %d", s, n))
		}
		sort.Strings(states)
		b.ReportMetric(r.Next.Seconds(), "next-admitted-s")
		b.ReportMetric(float64(r.Lost), "lost")
		b.ReportMetric(float64(r.Twice), "twice")
		benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B15",
			What:    fmt.Sprintf("%s%d jobs in flight on 2 control-plane and 2 runtime replicas; one pod of each deleted", smoke, r.Jobs),
			Slipway: fmt.Sprintf("%s; %d lost, %d run twice (%s)", next, r.Lost, r.Twice, strings.Join(states, ", ")),
			Peer:    "-", NoPeer: true,
			Target: fmt.Sprintf("0 lost, 0 twice, next admitted within %s", within),
			Met:    r.Lost == 0 && r.Twice == 0 && r.Next >= 0 && r.Next <= within}))
	}
}
