package runtime

import (
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// StateLedger records the time each sandbox spends in each state, for cost
// by state (package cost's Ledger). Its methods must not block: they are
// on the claim path.
type StateLedger interface {
	Enter(cost.Entry)
	Leave(id string, at time.Time)
}

var _ StateLedger = (*cost.Ledger)(nil)

// WithLedger records every sandbox this Warm creates, hands to a claim and
// deletes in l: a warm member is warm idle from its creation until a claim
// takes it (then active, or proof for a rollout's proof claim) or it is
// deleted; a cold start is active from its creation.
func WithLedger(l StateLedger) WarmOption {
	return func(w *Warm) { w.ledger = l }
}

// enter records that s is held by owner from at on (its creation time for
// a new sandbox).
func (w *Warm) enter(s *sandbox.Sandbox, owner string, proof bool, at time.Time) {
	if w.ledger == nil || s == nil {
		return
	}
	e := cost.Entry{SandboxID: s.ID, Pool: s.Pool, Generation: s.Generation, At: at}
	switch {
	case owner == sandbox.OwnerWarm:
		e.State = cost.WarmIdle
	case proof:
		e.State = cost.Proof
	default:
		e.State, e.RunID = cost.Active, owner
	}
	w.ledger.Enter(e)
}

// leave records that sandbox id is gone.
func (w *Warm) leave(id string) {
	if w.ledger != nil {
		w.ledger.Leave(id, time.Now())
	}
}
