package serve

import (
	"context"
	"fmt"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/tenancy"
	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
)

// costReport serves a pool's cost from ledger (GET
// /v1/pools/{pool}/cost): what the ledger committed once the events
// queued before the request are, priced by pricing.yaml at the head of
// the config repository (a price it has not is unknown, never zero).
func costReport(c Config, ledger *cost.Ledger) runtime.CostReport {
	return func(ctx context.Context, pool string, since, until time.Time) (any, error) {
		var prices *tenancy.Pricing
		if c.Repo != "" {
			repo, err := gitops.Open(ctx, c.Repo)
			if err != nil {
				return nil, err
			}
			tc, err := tenancy.Load(ctx, repo, c.Branch)
			if err != nil {
				return nil, fmt.Errorf("prices: %w", err)
			}
			prices = tc.Prices()
		}
		recs, err := ledger.Records(ctx) // once what was queued before is committed
		if err != nil {
			return nil, err
		}
		defer recs.Close()
		return recs.Pool(ctx, pool, cost.Window{Since: since, Until: until}, prices)
	}
}
