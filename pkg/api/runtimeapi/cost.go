package runtimeapi

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// PoolCost is a pool's resource time and cost per state within a window,
// read from the runtime's cost ledger (GET
// /v1/pools/{pool}/cost?since=RFC3339&until=RFC3339). Prices come from
// the runtime's config repository (pricing.yaml); a price it has not is
// named in Unknown, never counted as zero.
type PoolCost struct {
	Pool     string    `json:"pool"`
	Since    time.Time `json:"since"`
	Until    time.Time `json:"until"`
	Currency string    `json:"currency,omitempty"`
	// PriceClass is the pool's class in the price table ("" without one).
	PriceClass string      `json:"priceClass,omitempty"`
	States     []CostState `json:"states"`
	Storage    CostStorage `json:"storage"`
	// WarmHits and ColdStarts count the allocations that began within the
	// window; WarmHitFraction is nil without any.
	WarmHits        int      `json:"warmHits"`
	ColdStarts      int      `json:"coldStarts"`
	WarmHitFraction *float64 `json:"warmHitFraction"`
	// UnusedWarmMinutes is the warm members' ready and unclaimed time.
	UnusedWarmMinutes float64 `json:"unusedWarmMinutes"`
	// Known is the sum of the known costs; Unknown names each term whose
	// price or quantity is unknown, and why (Known is then no total).
	Known   float64  `json:"known"`
	Unknown []string `json:"unknown,omitempty"`
	// Gaps counts ledger events lost within the window.
	Gaps int `json:"gaps,omitempty"`
}

// CostState is the time a pool's sandboxes spent in one state (warming,
// warm idle, active, draining, retained) within the window.
type CostState struct {
	State   string  `json:"state"`
	Seconds float64 `json:"seconds"`
	// Intervals overlap the window; Open are still open; UnknownEnd ended
	// at a time the ledger cannot tell (their runtime was killed), adding
	// up to UnknownSeconds more, not in Seconds and not priced.
	Intervals      int     `json:"intervals"`
	Open           int     `json:"open,omitempty"`
	UnknownEnd     int     `json:"unknownEnd,omitempty"`
	UnknownSeconds float64 `json:"unknownSeconds,omitempty"`
	// RatePerHour and Cost are nil when the price is unknown.
	RatePerHour *float64 `json:"ratePerHour"`
	Cost        *float64 `json:"cost"`
	// NotApplicable says why the state cannot occur on this runtime.
	NotApplicable string `json:"notApplicable,omitempty"`
}

// CostStorage is the bytes a pool's sandboxes kept on disk, as sampled.
type CostStorage struct {
	GiBHours       float64  `json:"gibHours"`
	Samples        int      `json:"samples"`
	PeakBytes      int64    `json:"peakBytes"`
	RatePerGiBHour *float64 `json:"ratePerGiBHour"`
	Cost           *float64 `json:"cost"`
	// Covers says what the samples measure, and what they leave out.
	Covers string `json:"covers"`
}

// PoolCost reads pool's cost within [since, until) from the runtime's
// ledger. A runtime that keeps no ledger answers 404.
func (c *Client) PoolCost(ctx context.Context, pool string, since, until time.Time) (*PoolCost, error) {
	q := url.Values{}
	q.Set("since", since.UTC().Format(time.RFC3339Nano))
	q.Set("until", until.UTC().Format(time.RFC3339Nano))
	var out PoolCost
	if err := c.do(ctx, http.MethodGet, "/v1/pools/"+url.PathEscape(pool)+"/cost?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
