package control

import (
	"context"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/control/internal/delivery"
	"github.com/slipway-dev/slipway/pkg/control/internal/jobs"
)

// DeliveryConfig configures the output worker: it delivers each tenant's
// job events to the tenant's destinations (tenants/<name>.yaml), apart
// from the runs (a run never waits on a destination).
type DeliveryConfig = delivery.Config

// deliveryLoop runs the output worker (internal/delivery) until ctx ends.
func (p *Plane) deliveryLoop(ctx context.Context) {
	delivery.Run(ctx, p.c.Delivery, delivery.Env{Store: p.st, Current: p.c.Config.Current, Owner: p.c.ID,
		Logger: p.c.Logger, Metrics: p.c.Metrics, Span: jobs.SpanOf(p.c.Tracing)})
}

// deliveryView fills j's ResultPublished and Delivery from the output
// worker's records and the tenant's destinations now.
func (p *Plane) deliveryView(ctx context.Context, j *controlapi.Job) error {
	return delivery.View(ctx, p.st, p.c.Config.Current, j)
}
