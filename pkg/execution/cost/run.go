package cost

import (
	"context"
	"fmt"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/config/tenancy"
)

// Term is one part of a run's cost: a quantity, its unit, the rate and the
// cost. Cost is nil when the term is unknown (Why says why): an unknown
// quantity, or a known one with no price. A term is never guessed.
type Term struct {
	Name     string   `json:"name"`
	Quantity *float64 `json:"quantity"`
	Unit     string   `json:"unit,omitempty"`
	Rate     *float64 `json:"rate"`
	Cost     *float64 `json:"cost"`
	Why      string   `json:"why,omitempty"`
}

// Run terms.
const (
	TermActive   = "active compute"
	TermWarmIdle = "warm idle before its claim"
	TermStorage  = "workspace storage"
	TermEgress   = "network egress"
	TermTokens   = "model tokens"
	TermNode     = "node overhead"
	TermRetained = "retained"
)

// RunCost is what one run cost, term by term.
type RunCost struct {
	RunID    string `json:"runId"`
	Pool     string `json:"pool"`
	Currency string `json:"currency,omitempty"`
	// Attempts counts the sandboxes that held the run (allocation
	// attempts the ledger saw).
	Attempts int `json:"attempts"`
	// Open is true while the run holds a sandbox: its active time counts
	// to now.
	Open  bool   `json:"open,omitempty"`
	Terms []Term `json:"terms"`
	// Known sums the known terms; Unknown names the others. Known is never
	// the run's whole cost while Unknown is not empty.
	Known   float64  `json:"known"`
	Unknown []string `json:"unknown"`
}

// Run gives run runID's cost terms from the ledger, priced by prices (nil:
// unknown), with m (its manifest, may be nil) for what the ledger does not
// hold (egress bytes). ErrNotFound when the ledger has no interval of the
// run.
//
// Terms: its active compute (every sandbox that held it, moves included,
// from the claim or cold start's creation to deletion) at the active rate;
// the warm idle time of the warm member it took, from that member's
// creation to the claim, at the warm rate (the member was started and kept
// for the claim that took it; members never claimed are the pool's, not a
// run's); its workspace's sampled bytes while it held it, at the storage
// rate. Network egress is measured (the manifest's egress attempts) but
// has no price; model tokens and the node's overhead Slipway cannot see or
// apportion: they are named unknown, never zero.
func (r *Records) Run(ctx context.Context, runID string, prices *tenancy.Pricing, m *runmanifest.Manifest, now time.Time) (*RunCost, error) {
	if now.IsZero() {
		now = time.Now()
	}
	rows, err := r.db.QueryContext(ctx, r.q(`SELECT pool, sandbox_id, start_ns, coalesce(end_ns, 0), end_unknown, coalesce(end_max_ns, 0)
		FROM intervals WHERE run_id = ? AND state = ? ORDER BY start_ns, id`), runID, string(Active))
	if err != nil {
		return nil, fmt.Errorf("cost: %s: %w", r.path, err)
	}
	type held struct {
		sandbox    string
		start, end int64
		unknown    bool
		endMax     int64
	}
	var hs []held
	rc := &RunCost{RunID: runID}
	for rows.Next() {
		var h held
		if err := rows.Scan(&rc.Pool, &h.sandbox, &h.start, &h.end, &h.unknown, &h.endMax); err != nil {
			rows.Close()
			return nil, fmt.Errorf("cost: %s: %w", r.path, err)
		}
		hs = append(hs, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("cost: %s: %w", r.path, err)
	}
	if len(hs) == 0 {
		return nil, fmt.Errorf("%w: the ledger %s has no interval of run %s (it ran before the ledger, on another runtime, or not on the local backend)", ErrNotFound, r.path, runID)
	}
	rc.Attempts = len(hs)
	rates, priced := prices.Rate(rc.Pool)
	if prices != nil {
		rc.Currency = prices.Currency
	}
	noPrice := whyNoPrice(prices, rc.Pool, priced)

	// Active compute.
	var active, unknownEnd float64
	ends := map[string]int64{}
	for _, h := range hs {
		end := h.end
		if end == 0 {
			end = now.UnixNano()
			rc.Open = true
		}
		active += float64(max(end-h.start, 0)) / 1e9
		if h.unknown {
			unknownEnd += float64(max(h.endMax-h.end, 0)) / 1e9
		}
		ends[h.sandbox] = end
	}
	t := Term{Name: TermActive, Quantity: ptr(active / 3600), Unit: "hour"}
	if priced {
		t.Rate = ptr(rates.Active)
	}
	if unknownEnd > 0 {
		t.Why = fmt.Sprintf("its runtime was killed: it ended up to %s after the time counted", seconds(unknownEnd))
	}
	rc.add(t, noPrice)
	if unknownEnd > 0 {
		rc.Unknown = append(rc.Unknown, TermActive+" after its runtime was killed")
	}

	// Warm idle of the member it took, if its first sandbox was one.
	first := hs[0]
	var idle float64
	var wasWarm bool
	if err := r.db.QueryRowContext(ctx, r.q(`SELECT count(*) > 0, coalesce(sum(coalesce(end_ns, ?) - start_ns), 0) FROM intervals WHERE sandbox_id = ? AND state = ? AND start_ns <= ?`),
		first.start, first.sandbox, string(WarmIdle), first.start).Scan(&wasWarm, &idle); err != nil {
		return nil, fmt.Errorf("cost: %s: %w", r.path, err)
	}
	if wasWarm {
		t := Term{Name: TermWarmIdle, Quantity: ptr(idle / 1e9 / 3600), Unit: "hour"}
		if priced {
			t.Rate = rates.Warm
		}
		rc.add(t, noPrice)
	} else {
		rc.add(Term{Name: TermWarmIdle, Quantity: ptr(0), Unit: "hour", Rate: ptr(0), Why: "a cold start: it took no warm member"}, "")
	}

	// Storage: its sandboxes' samples while it held them.
	var gibHours float64
	var samples int
	for _, h := range hs {
		srows, err := r.db.QueryContext(ctx, r.q(`SELECT at_ns, period_ns, bytes FROM storage_samples WHERE sandbox_id = ? AND at_ns + period_ns > ? AND at_ns < ?`), h.sandbox, h.start, ends[h.sandbox])
		if err != nil {
			return nil, fmt.Errorf("cost: %s: %w", r.path, err)
		}
		for srows.Next() {
			var at, period, bytes int64
			if err := srows.Scan(&at, &period, &bytes); err != nil {
				srows.Close()
				return nil, fmt.Errorf("cost: %s: %w", r.path, err)
			}
			samples++
			gibHours += float64(bytes) / (1 << 30) * float64(clip(at, at+period, h.start, ends[h.sandbox])) / float64(time.Hour)
		}
		srows.Close()
	}
	st := Term{Name: TermStorage, Unit: "GiB-hour"}
	if samples > 0 {
		st.Quantity = ptr(gibHours)
		if priced {
			st.Rate = rates.Storage
		}
		rc.add(st, noPrice)
	} else {
		rc.add(st, "no storage sample fell within its claim (samples are taken every sampling interval)")
	}

	// Egress: measured bytes, no price in the table.
	eg := Term{Name: TermEgress, Unit: "byte"}
	if m != nil {
		var b int64
		for _, a := range m.Egress {
			b += a.BytesIn + a.BytesOut
		}
		eg.Quantity = ptr(float64(b))
		switch {
		case m.EgressDropped > 0:
			eg.Quantity = nil
			rc.add(eg, fmt.Sprintf("the manifest dropped %d egress attempts over its bound: the bytes are not all known", m.EgressDropped))
		case b == 0: // nothing left the sandbox: zero at any price
			eg.Cost, eg.Why = ptr(0), "no egress"
			rc.Terms = append(rc.Terms, eg)
		default:
			rc.add(eg, "pricing.yaml has no network price")
		}
	} else {
		rc.add(eg, "no run manifest given")
	}
	rc.add(Term{Name: TermTokens}, "Slipway does not see the workload's model calls")
	rc.add(Term{Name: TermNode}, "the host's own share (runtime, proxies, kernel, idle capacity) is not apportioned to runs")
	rc.add(Term{Name: TermRetained, Quantity: ptr(0), Unit: "hour", Rate: ptr(0), Why: "not applicable: the local runtime deletes a run's sandbox when it ends and suspends none"}, "")
	return rc, nil
}

// add prices t (Cost from Quantity and Rate when both are known) and
// appends it; otherwise it is unknown, why explaining.
func (rc *RunCost) add(t Term, why string) {
	if t.Quantity != nil && t.Rate != nil {
		c := *t.Quantity * *t.Rate
		t.Cost = &c
		rc.Known += c
	} else {
		if t.Why == "" {
			t.Why = why
		} else if why != "" {
			t.Why += "; " + why
		}
		rc.Unknown = append(rc.Unknown, t.Name)
	}
	rc.Terms = append(rc.Terms, t)
}

func ptr(f float64) *float64 { return &f }
