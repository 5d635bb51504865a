package cost

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/tenancy"
)

// ErrNotFound marks a ledger file that does not exist, or a run the ledger
// has no interval of.
var ErrNotFound = errors.New("cost: not found")

// Records reads a ledger, while its runtime writes it or after: a file
// (Open) or PostgreSQL (OpenPostgres), the reports the same.
type Records struct {
	db     *sql.DB
	path   string // what an error names: the file, or host:port/database
	pg     bool   // PostgreSQL: placeholders are $n
	shared bool   // db is a Ledger's: Close leaves it open
}

// q is query in the ledger's dialect.
func (r *Records) q(query string) string { return sqlIn(r.pg, query) }

// Open opens the ledger at path for reading; ErrNotFound when there is no
// such file (a runtime writes it into its state directory as StateFile).
func Open(ctx context.Context, path string) (*Records, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: no cost ledger at %s (a runtime on the local backend writes it)", ErrNotFound, path)
		}
		return nil, fmt.Errorf("cost: %w", err)
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_query_only=1")
	if err != nil {
		return nil, fmt.Errorf("cost: open %s: %w", path, err)
	}
	var v int
	if err := db.QueryRowContext(ctx, `SELECT version FROM cost_schema`).Scan(&v); err != nil || v != SchemaVersion {
		db.Close()
		return nil, fmt.Errorf("%w: %s is not a cost ledger of schema version %d (version %d, %v)", ErrInvalid, path, SchemaVersion, v, err)
	}
	return &Records{db: db, path: path}, nil
}

// Close closes the file or the connections.
func (r *Records) Close() error {
	if r.shared {
		return nil
	}
	return r.db.Close()
}

// Window is the time a report covers: [Since, Until).
type Window struct {
	Since, Until time.Time
}

// StateTime is the time a pool's sandboxes spent in one state within a
// window, and what it cost.
type StateTime struct {
	State State `json:"state"`
	// Seconds is the known time in the state (open intervals counted to the
	// window's end).
	Seconds float64 `json:"seconds"`
	// Intervals counts the intervals that overlap the window; Open those
	// still open; UnknownEnd those whose runtime was killed: each ended
	// between its last sign of life (counted in Seconds) and the next start,
	// which adds up to UnknownSeconds more (not in Seconds, not priced).
	Intervals      int     `json:"intervals"`
	Open           int     `json:"open,omitempty"`
	UnknownEnd     int     `json:"unknownEnd,omitempty"`
	UnknownSeconds float64 `json:"unknownSeconds,omitempty"`
	// RatePerHour is the price table's rate for the state; Cost is
	// Seconds at that rate. Both nil when the price is unknown.
	RatePerHour *float64 `json:"ratePerHour"`
	Cost        *float64 `json:"cost"`
	// NotApplicable says why the state cannot occur here (retained on the
	// local runtime); Seconds is then 0 by construction.
	NotApplicable string `json:"notApplicable,omitempty"`
}

// Storage is the bytes a pool's sandboxes kept on disk within a window, as
// sampled, and what it cost.
type Storage struct {
	// GiBHours integrates the samples: each sample's bytes for its period,
	// cut at the window's ends and at the sandbox's deletion.
	GiBHours float64 `json:"gibHours"`
	Samples  int     `json:"samples"`
	// PeakBytes is the largest sum of one sampling round.
	PeakBytes      int64    `json:"peakBytes"`
	RatePerGiBHour *float64 `json:"ratePerGiBHour"`
	Cost           *float64 `json:"cost"`
	// Covers says what the samples measure, and what they leave out.
	Covers string `json:"covers"`
}

// PoolReport is a pool's resource time and cost per state within a window.
type PoolReport struct {
	Pool     string    `json:"pool"`
	Since    time.Time `json:"since"`
	Until    time.Time `json:"until"`
	Currency string    `json:"currency,omitempty"`
	// PriceClass is the pool's class in the price table; "" when the pool
	// has no price.
	PriceClass string      `json:"priceClass,omitempty"`
	States     []StateTime `json:"states"`
	Storage    Storage     `json:"storage"`
	// WarmHits and ColdStarts count the allocations (claims and moves)
	// that began within the window; WarmHitFraction is nil without any.
	WarmHits        int      `json:"warmHits"`
	ColdStarts      int      `json:"coldStarts"`
	WarmHitFraction *float64 `json:"warmHitFraction"`
	// UnusedWarmMinutes is the warm idle time in minutes: warm members
	// ready (or starting) and unclaimed.
	UnusedWarmMinutes float64 `json:"unusedWarmMinutes"`
	// Known is the sum of the known costs; Unknown names each term whose
	// price or quantity is unknown, and why. Known is never a total when
	// Unknown is not empty.
	Known   float64  `json:"known"`
	Unknown []string `json:"unknown,omitempty"`
	// Gaps counts ledger events lost within the window (a full queue or a
	// failed commit): the times above are then short by those events.
	Gaps int `json:"gaps,omitempty"`
}

// interval is one ledger row.
type interval struct {
	sandbox, state, run string
	start, end          int64 // end 0: open
	unknown             bool
	endMax              int64
}

// clip returns the overlap of [a, b) with [lo, hi) in nanoseconds.
func clip(a, b, lo, hi int64) int64 {
	a, b = max(a, lo), min(b, hi)
	return max(b-a, 0)
}

// Pool reports pool's time and cost per state within w, priced by prices
// (nil: every price unknown).
func (r *Records) Pool(ctx context.Context, pool string, w Window, prices *tenancy.Pricing) (*PoolReport, error) {
	if w.Until.IsZero() {
		w.Until = time.Now()
	}
	if !w.Since.Before(w.Until) {
		return nil, fmt.Errorf("%w: window %s to %s is empty", ErrInvalid, w.Since.Format(time.RFC3339), w.Until.Format(time.RFC3339))
	}
	lo, hi := w.Since.UnixNano(), w.Until.UnixNano()
	rows, err := r.db.QueryContext(ctx, r.q(`SELECT sandbox_id, state, run_id, start_ns, coalesce(end_ns, 0), end_unknown, coalesce(end_max_ns, 0)
		FROM intervals WHERE pool = ? AND start_ns < ? AND (end_ns IS NULL OR end_ns >= ? OR end_max_ns > ?) ORDER BY start_ns, id`), pool, hi, lo, lo)
	if err != nil {
		return nil, fmt.Errorf("cost: %s: %w", r.path, err)
	}
	var ivs []interval
	for rows.Next() {
		var iv interval
		if err := rows.Scan(&iv.sandbox, &iv.state, &iv.run, &iv.start, &iv.end, &iv.unknown, &iv.endMax); err != nil {
			rows.Close()
			return nil, fmt.Errorf("cost: %s: %w", r.path, err)
		}
		ivs = append(ivs, iv)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("cost: %s: %w", r.path, err)
	}
	rep := &PoolReport{Pool: pool, Since: w.Since, Until: w.Until}
	rates, priced := prices.Rate(pool)
	if prices != nil {
		rep.Currency = prices.Currency
		if priced {
			rep.PriceClass = prices.Pools[pool]
		}
	}
	by := map[State]*StateTime{}
	for _, s := range states {
		st := &StateTime{State: s}
		by[s] = st
	}
	wasWarm := map[string]bool{} // sandbox -> had a warm idle interval
	ended := map[string]int64{}  // sandbox -> end of its last interval (0: open)
	for _, iv := range ivs {
		st, ok := by[State(iv.state)]
		if !ok {
			continue
		}
		st.Intervals++
		end := iv.end
		if iv.end == 0 {
			end = hi
			st.Open++
		}
		st.Seconds += float64(clip(iv.start, end, lo, hi)) / 1e9
		if iv.unknown {
			st.UnknownEnd++
			st.UnknownSeconds += float64(clip(iv.end, iv.endMax, lo, hi)) / 1e9
		}
		if State(iv.state) == WarmIdle {
			wasWarm[iv.sandbox] = true
		}
		if State(iv.state) == Active && iv.start >= lo {
			if wasWarm[iv.sandbox] {
				rep.WarmHits++
			} else {
				rep.ColdStarts++
			}
		}
		if iv.end == 0 {
			ended[iv.sandbox] = 0
		} else if e, seen := ended[iv.sandbox]; !seen || (e != 0 && iv.end > e) {
			ended[iv.sandbox] = iv.end
		}
	}
	if by[Retained].Intervals == 0 { // no runtime records it yet
		by[Retained].NotApplicable = "none recorded: the local runtime deletes a sandbox when its claim ends and suspends none; on Kubernetes, no Sandbox of the pool was scaled to zero replicas in the window"
	}
	if n := rep.WarmHits + rep.ColdStarts; n > 0 {
		f := float64(rep.WarmHits) / float64(n)
		rep.WarmHitFraction = &f
	}
	rep.UnusedWarmMinutes = by[WarmIdle].Seconds / 60
	price := func(s State) *float64 {
		switch {
		case !priced:
			return nil
		case s == WarmIdle:
			return rates.Warm
		case s == Active, s == Proof:
			a := rates.Active
			return &a
		case s == Retained:
			return rates.Retained
		}
		return nil
	}
	for _, s := range states {
		st := by[s]
		st.RatePerHour = price(s)
		switch {
		case st.NotApplicable != "":
		case st.RatePerHour != nil:
			c := st.Seconds / 3600 * *st.RatePerHour
			st.Cost = &c
			rep.Known += c
		case st.Seconds > 0:
			rep.Unknown = append(rep.Unknown, fmt.Sprintf("%s: %s at no known price (%s)", s, seconds(st.Seconds), whyNoPrice(prices, pool, priced)))
		}
		if st.UnknownEnd > 0 {
			rep.Unknown = append(rep.Unknown, fmt.Sprintf("%s: %d intervals ended at an unknown time (their runtime was killed): up to %s more", s, st.UnknownEnd, seconds(st.UnknownSeconds)))
		}
		rep.States = append(rep.States, *st)
	}
	if err := r.storage(ctx, pool, lo, hi, ended, rep); err != nil {
		return nil, err
	}
	if priced {
		rep.Storage.RatePerGiBHour = rates.Storage
	}
	switch {
	case rep.Storage.RatePerGiBHour != nil:
		c := rep.Storage.GiBHours * *rep.Storage.RatePerGiBHour
		rep.Storage.Cost = &c
		rep.Known += c
	case rep.Storage.Samples > 0:
		rep.Unknown = append(rep.Unknown, fmt.Sprintf("storage: %.6f GiB-hours at no known price (%s)", rep.Storage.GiBHours, whyNoPrice(prices, pool, priced)))
	}
	if err := r.db.QueryRowContext(ctx, r.q(`SELECT coalesce(sum(events), 0) FROM gaps WHERE at_ns >= ? AND at_ns < ?`), lo, hi).Scan(&rep.Gaps); err != nil {
		return nil, fmt.Errorf("cost: %s: %w", r.path, err)
	}
	if rep.Gaps > 0 {
		rep.Unknown = append(rep.Unknown, fmt.Sprintf("ledger: %d events lost in the window (all pools): the times are short by them", rep.Gaps))
	}
	return rep, nil
}

// storageCovers says what storage samples measure.
const storageCovers = "each sandbox's workspace, sampled; template and runner caches are shared by pools and not counted"

// storage integrates pool's samples over [lo, hi), each cut at its
// sandbox's end (ended: 0 for a sandbox still open).
func (r *Records) storage(ctx context.Context, pool string, lo, hi int64, ended map[string]int64, rep *PoolReport) error {
	rep.Storage.Covers = storageCovers
	// a sample stands for at most maxPeriod: one taken before lo may reach in
	rows, err := r.db.QueryContext(ctx, r.q(`SELECT sandbox_id, at_ns, period_ns, bytes FROM storage_samples
		WHERE pool = ? AND at_ns >= ? AND at_ns < ? AND at_ns + period_ns > ? ORDER BY at_ns`), pool, lo-int64(maxPeriod), hi, lo)
	if err != nil {
		return fmt.Errorf("cost: %s: %w", r.path, err)
	}
	defer rows.Close()
	round := map[int64]int64{}
	for rows.Next() {
		var id string
		var at, period, bytes int64
		if err := rows.Scan(&id, &at, &period, &bytes); err != nil {
			return fmt.Errorf("cost: %s: %w", r.path, err)
		}
		end := at + period
		if e, ok := ended[id]; ok && e != 0 {
			end = min(end, e)
		}
		rep.Storage.Samples++
		rep.Storage.GiBHours += float64(bytes) / (1 << 30) * float64(clip(at, end, lo, hi)) / float64(time.Hour)
		round[at] += bytes
	}
	for _, b := range round {
		rep.Storage.PeakBytes = max(rep.Storage.PeakBytes, b)
	}
	return rows.Err()
}

// maxPeriod is the longest period a storage sample may stand for.
const maxPeriod = time.Hour

// seconds prints s seconds as a duration, to the millisecond.
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

func whyNoPrice(p *tenancy.Pricing, pool string, priced bool) string {
	switch {
	case p == nil:
		return "no price table given"
	case !priced:
		return fmt.Sprintf("pool %s is not in pricing.yaml", pool)
	}
	return fmt.Sprintf("pricing.yaml's class %s has no price for it", p.Pools[pool])
}
