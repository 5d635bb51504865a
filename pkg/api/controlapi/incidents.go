package controlapi

import (
	"context"
	"net/http"
	"time"
)

// Incidents is GET /v1/incidents (operators only): per incident kind, the
// jobs that show it, read from the control plane's store (the shape of
// `slipway incidents -o json`).
type Incidents struct {
	Kinds []IncidentKind `json:"kinds"`
	// Open counts the incidents whose outcome is not confirmed.
	Open int `json:"open"`
}

// IncidentKind is one kind's incidents, newest first.
type IncidentKind struct {
	Kind  string `json:"kind"`
	Title string `json:"title"`
	// Sourced says a source that covers this kind was read: an empty list
	// is "none" only then, "not looked at" otherwise.
	Sourced   bool       `json:"sourced"`
	Incidents []Incident `json:"incidents"`
}

// Incident is one job or run that shows a kind, with its evidence.
type Incident struct {
	Kind   string `json:"kind"`
	Job    string `json:"job,omitempty"`
	Run    string `json:"run,omitempty"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Terminal says the outcome is confirmed; otherwise Owner must act by
	// Deadline.
	Terminal bool           `json:"terminal"`
	Owner    string         `json:"owner,omitempty"`
	Deadline *time.Time     `json:"deadline,omitempty"`
	Attempts int            `json:"attempts,omitempty"`
	Evidence []IncidentFact `json:"evidence,omitempty"`
	Receipts []string       `json:"receipts,omitempty"`
	// Next is the next action, and whose.
	Next string    `json:"next,omitempty"`
	At   time.Time `json:"at,omitzero"`
}

// IncidentFact is one named piece of evidence.
type IncidentFact struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

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
