// Package pool defines a pool's documents in the config repository and
// where they live:
//
//	pools/<pool>/pool.yaml                 kind: Pool       (settings)
//	pools/<pool>/desired.yaml              kind: PoolState  (desired state)
//	pools/<pool>/generations/<id>.yaml     kind: Generation (immutable)
//	pools/<pool>/kustomization.yaml        images pinned by digest
//	policies/verification.yaml             kind: VerificationPolicy
//
// A Pool says which artifact kinds a generation must pin, how many warm
// sandboxes to keep and how fast to refill them, the deadlines of a
// rollout's phases, what to do at the drain deadline, the rollback and
// restore windows, the network a sandbox gets and which proofs a rollout
// runs. A PoolState lists the generations the pool holds (warming, active,
// draining, retained), the target generation promoted last, and the
// rollout in progress with its lease. Both parse strictly with file:line
// errors and marshal to stable bytes.
//
// Set edits a pool.yaml by setting name (FIELD=VALUE as `slipway pool set`
// takes it: warmSize=4, phaseDeadlines.warm=5m, network=deny), keeping its
// comments and key order, checks each value and then the whole result, and
// says what changed; Settings lists a pool's settings under those names.
// Committing the edit is package release's.
package pool
