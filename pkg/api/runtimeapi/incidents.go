package runtimeapi

import (
	"context"
	"net/http"

	"github.com/slipway-dev/slipway/pkg/api/incidentreport"
)

// Incidents is GET /v1/incidents on a runtime: per incident kind, the runs
// its own records show (its run manifests: credentials that expired while
// a run was open or were renewed, request keys with more than one run; its
// cleanup reconciler's records: deletes whose outcome is unknown). It is
// the incident report both servers serve (incidentreport, and `slipway
// incidents -o json`): a kind the runtime's records cannot show is there
// with Sourced false.
type Incidents = incidentreport.Report

// Incidents reads the runtime's incidents. A runtime that serves none (an
// older one) answers 404.
func (c *Client) Incidents(ctx context.Context) (*Incidents, error) {
	var out Incidents
	if err := c.do(ctx, http.MethodGet, "/v1/incidents", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
