package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// Named defaults.
const (
	// DefaultInterval is how often a runtime's reconciler makes a pass.
	DefaultInterval = 30 * time.Second
	// DefaultGrace is how long a running sandbox must stay a candidate
	// whose lease is not recorded (its owner's run is absent, or the run
	// records another sandbox) before it is deleted: a claim records its
	// manifest, and a move its new sandbox, moments after the backend's
	// owner changes.
	DefaultGrace = 5 * time.Second
	// DefaultStuckAfter is how long a sandbox may stay stopping (taken out
	// of its pool to be deleted, or its deletion begun) before the
	// reconciler finishes it.
	DefaultStuckAfter = time.Minute
	// DefaultActionTimeout bounds one destructive action.
	DefaultActionTimeout = 30 * time.Second
	// DefaultUnknownDeadline is how long after its first failure a cleanup
	// unknown record should be resolved; past it the alert says overdue.
	DefaultUnknownDeadline = 10 * time.Minute
	// DefaultWorkers is how many actions run at once.
	DefaultWorkers = 4
	// DefaultClusterWorkers is how many run at once on a cluster backend
	// (sandbox.Objects): an action there is a few API calls, bound by
	// their round trips, not by this host's CPU.
	DefaultClusterWorkers = 16
	// DefaultKeepRecords is how long closed records (done, resolved, kept)
	// are kept; open ones are kept until they close.
	DefaultKeepRecords = 7 * 24 * time.Hour
)

// Failpoints (Config.Failpoint; the CLI reads $SLIPWAY_TEST_FAILPOINT).
const (
	// FailpointDeleteHang makes every sandbox delete hang until its action
	// timeout: a delete that never returns, which cannot be caused for real
	// on the local backend.
	FailpointDeleteHang = "reconcile.delete.hang"
)

// ownerReaping prefixes the owner the reconciler gives a running sandbox
// (with the owner compare-and-swap a claim uses) before it deletes it: a
// claim or adoption that won the swap keeps the sandbox.
const ownerReaping = "reaping:"

// ownerRetiring is the owner the runtime's warm loop gives a warm member it
// is deleting.
const ownerRetiring = "retiring"

// Runs is the authoritative record of runs: the run store.
type Runs interface {
	Get(ctx context.Context, runID string) (*runmanifest.Manifest, error)
}

var _ Runs = (runs.Store)(nil)

// Credential is a credential a broker still honours.
type Credential struct {
	Fingerprint string
	RunID       string
	ExpiresAt   time.Time
}

// Credentials is a credential broker: what it honours now, and revocation
// (repeat-safe).
type Credentials interface {
	Live() []Credential
	Revoke(fingerprint string)
}

// Interrupted is a backend that can show deletions that began and did not
// finish (the local backend's .deleting-<id> folders) and finish them.
type Interrupted interface {
	Interrupted(ctx context.Context) (map[string]time.Time, error)
	FinishInterrupted(ctx context.Context, id string) error
}

// Metrics receives each pass's figures by pool.
type Metrics interface {
	Orphans(ctx context.Context, pool string, n int64)
	CleanupUnknown(ctx context.Context, pool string, n int64)
}

// Config is what a Reconciler reads and acts on.
type Config struct {
	// Backend's List is the observed state; its SetOwner is the fence and
	// its Delete the action. Required.
	Backend sandbox.Backend
	// Runs is the run store. Required.
	Runs Runs
	// Records keeps the cleanup records. Required.
	Records *Records
	// Owner names this reconciler in its records: the runtime's name and
	// listen address. Required.
	Owner string
	// Warm returns the generations each pool keeps warm (warming and
	// active) in the desired state, and false when the desired state is not
	// known: then no warm member is swept.
	Warm func() (map[string]map[string]bool, bool)
	// Synced, when set, is when the desired state Warm returns was read:
	// on a cluster, an object created after it (applied from a newer
	// commit) is never swept as warm-inactive. nil: no such check.
	Synced func() time.Time
	// Held says whether the runtime holds owner in memory right now (an
	// open claim, or a proof claim under way, which has no run manifest):
	// a sandbox it owns is never a no-lease candidate. nil: none.
	Held func(owner string) bool
	// Credentials is the broker whose credentials are swept; nil: none.
	Credentials Credentials
	// Metrics gets orphan_resource_count and cleanup_unknown_count; nil:
	// none.
	Metrics Metrics
	// Logger gets an ERROR line per cleanup unknown; nil: slog.Default.
	Logger *slog.Logger
	// Grace, StuckAfter, ActionTimeout, UnknownDeadline, KeepRecords and
	// Workers: zero keeps the defaults.
	Grace, StuckAfter, ActionTimeout, UnknownDeadline, KeepRecords time.Duration
	Workers                                                        int
	// Failpoint is a test's fault (FailpointDeleteHang); "" for none.
	Failpoint string
	// Deleted, when set, is told of each sandbox the reconciler deleted
	// (the cost ledger closes its interval).
	Deleted func(sandboxID string)
}

// Reconciler compares authoritative state with what the backend holds and
// cleans up the difference, one level-triggered pass at a time.
type Reconciler struct {
	c         Config
	failpoint atomic.Pointer[string]
	now       func() time.Time

	// beforeAct is a test's hook between a pass's read and its action.
	beforeAct func(c *candidate)

	mu    sync.Mutex      // one pass at a time
	seen  map[string]seen // candidates waiting out a grace, by kind/resource
	pools map[string]bool // pools reported to Metrics, so a pool whose count drops reports 0
}

type seen struct {
	lease string
	since time.Time
}

// New checks c and makes a Reconciler.
func New(c Config) (*Reconciler, error) {
	var errs []error
	if c.Backend == nil {
		errs = append(errs, errors.New("no backend"))
	}
	if c.Runs == nil {
		errs = append(errs, errors.New("no run store"))
	}
	if c.Records == nil {
		errs = append(errs, errors.New("no records"))
	}
	if c.Owner == "" {
		errs = append(errs, errors.New("no owner"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Grace, DefaultGrace)
	def(&c.StuckAfter, DefaultStuckAfter)
	def(&c.ActionTimeout, DefaultActionTimeout)
	def(&c.UnknownDeadline, DefaultUnknownDeadline)
	def(&c.KeepRecords, DefaultKeepRecords)
	if _, ok := c.Backend.(sandbox.Objects); ok && c.Workers <= 0 {
		c.Workers = DefaultClusterWorkers
	}
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	r := &Reconciler{c: c, now: time.Now, seen: map[string]seen{}, pools: map[string]bool{}}
	r.failpoint.Store(&c.Failpoint)
	return r, nil
}

// Run makes a pass every interval until ctx ends (the first at once),
// and one more as soon as a candidate's grace ends, so that a leak is
// cleaned within an interval of its appearing plus its grace.
func (r *Reconciler) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	tick := time.Now()
	for {
		rep, err := r.Pass(ctx)
		if err != nil && ctx.Err() == nil {
			r.c.Logger.Error("cleanup pass failed", "owner", r.c.Owner, "error", err.Error())
		}
		now := time.Now()
		for !tick.After(now) {
			tick = tick.Add(interval)
		}
		next := tick
		if rep != nil && !rep.NextDue.IsZero() && rep.NextDue.Before(next) {
			next = rep.NextDue
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Report says what one pass found and did.
type Report struct {
	// Found counts the candidates (orphans) by kind.
	Found map[string]int `json:"found"`
	// Cleaned, Kept, Pending and Unknown count actions' outcomes: done (or
	// resolved), left alone by the fence, waiting out a grace, and failed.
	Cleaned int `json:"cleaned"`
	Kept    int `json:"kept"`
	Pending int `json:"pending"`
	Unknown int `json:"unknown"`
	// Live counts the sandboxes with a live lease, untouched.
	Live     int           `json:"live"`
	Duration time.Duration `json:"duration"`
	// NextDue is when the first pending candidate's grace ends (zero:
	// none pending).
	NextDue time.Time `json:"nextDue,omitzero"`
}
