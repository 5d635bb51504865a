package controlapi

import (
	"context"
	"net/http"

	"github.com/slipway-dev/slipway/pkg/api/incidentreport"
)

// Incidents is GET /v1/incidents (operators only): per incident kind, the
// jobs that show it, read from the control plane's store (the shape of
// `slipway incidents -o json`, and of a runtime's report).
type Incidents = incidentreport.Report

// IncidentKind, Incident and IncidentFact are the report's parts
// (incidentreport).
type (
	IncidentKind = incidentreport.Kind
	Incident     = incidentreport.Incident
	IncidentFact = incidentreport.Fact
)

// Incidents reads the control plane's incidents (an operator's token; a
// tenant's is refused, 403; a control plane that serves none answers 404).
func (c *Client) Incidents(ctx context.Context) (*Incidents, error) {
	var out Incidents
	_, err := c.do(ctx, http.MethodGet, "/v1/incidents", nil, nil, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}
