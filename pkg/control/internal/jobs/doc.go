// Package jobs is the control plane's job engine: submission (validated
// against the tenant's configuration, priced, bounded), admission (fair
// sharing of the active slots, in the database's transactions), dispatch to
// the runtimes through River (claim, run the commands within the deadline,
// release), cancellation carried through to its observed end, recovery of
// the jobs whose owner died, and each job's trace.
//
// It is internal: library users drive it through pkg/control's Plane,
// which composes it with the event streams' retention, the output worker
// (internal/delivery) and the HTTP server. It stores through
// internal/store and writes a running job's output through
// internal/stream; it knows nothing of HTTP serving or delivery.
package jobs
