package cost_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/tenancy"
	"github.com/slipway-dev/slipway/pkg/execution/cost"
)

// A warm member waits 30 minutes, a run holds it for an hour; the pool's
// class prices warm idle and active time but not storage.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "cost")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, cost.StateFile)
	l, err := cost.OpenLedger(ctx, path)
	if err != nil {
		fmt.Println(err)
		return
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.Enter(cost.Entry{SandboxID: "sb-1", Pool: "agents", Generation: "g-1", State: cost.WarmIdle, At: t0})
	l.Enter(cost.Entry{SandboxID: "sb-1", Pool: "agents", Generation: "g-1", State: cost.Active, RunID: "r-1", At: t0.Add(30 * time.Minute)})
	l.Leave("sb-1", t0.Add(90*time.Minute))
	if err := l.Close(); err != nil {
		fmt.Println(err)
		return
	}

	prices, _ := tenancy.ParsePricing("pricing.yaml", []byte("apiVersion: slipway.dev/v1alpha1\nkind: Pricing\ncurrency: credits\n"+
		"classes: {std: {warm: 0.5, active: 2}}\npools: {agents: std}\n"))
	r, err := cost.Open(ctx, path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	rep, _ := r.Pool(ctx, "agents", cost.Window{Since: t0, Until: t0.Add(2 * time.Hour)}, prices)
	for _, s := range rep.States[:2] {
		fmt.Printf("%s %.0f s costs %.2f\n", s.State, s.Seconds, *s.Cost)
	}
	fmt.Printf("warm-hit fraction %.1f, unused warm minutes %.0f, known %.2f %s\n", *rep.WarmHitFraction, rep.UnusedWarmMinutes, rep.Known, rep.Currency)
	rc, _ := r.Run(ctx, "r-1", prices, nil, time.Time{})
	fmt.Printf("run r-1: known %.2f, unknown %q\n", rc.Known, rc.Unknown)
	// Output:
	// warm_idle 1800 s costs 0.25
	// active 3600 s costs 2.00
	// warm-hit fraction 1.0, unused warm minutes 30, known 2.25 credits
	// run r-1: known 2.25, unknown ["workspace storage" "network egress" "model tokens" "node overhead"]
}
