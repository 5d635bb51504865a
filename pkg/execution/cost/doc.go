// Package cost is cost by state: the time each sandbox of a runtime spends
// in each state, recorded durably, and what it cost at the price table's
// rates.
//
// A runtime on the local backend records a Ledger (StateFile, cost.db, in
// its state directory, beside runs.db but a file of its own, so ledger
// writes never queue behind run manifests): one interval per sandbox and
// state (pool, generation, sandbox id, state, run, start, end), the states
// being WarmIdle (a warm member from its creation until a claim takes it or
// it is deleted), Active (held by a run, from the claim or the cold start's
// creation until deletion; a move's new sandbox is another interval of the
// same run), Proof (a rollout's proof claim) and Retained (stopped but
// kept: the local runtime has none, and reports say so rather than show a
// zero as measured); and samples of the bytes each sandbox's workspace
// keeps on disk. Recording costs the claim path a queue append: one writer
// commits what is queued in one transaction (WAL, synchronous=NORMAL:
// durable across a process kill). The writer marks the ledger alive every
// few seconds; an interval still open when the ledger is opened again (its
// runtime was killed) is closed as having ended at an unknown time between
// that mark and the new start, flagged and counted, never silently.
//
// A runtime on the Kubernetes backend records the same file from the
// cluster's own timestamps with Observe (a Sandbox's creation, its claim's
// creation, its Ready condition's last transition when scaled to zero, its
// deletion): repeat-safe, and an interval a stopped runtime left open is
// reopened when the cluster says it never ended, not counted twice.
//
// Runtime replicas on one cluster share one ledger in PostgreSQL
// (OpenLedgerPostgres, schema Schema): the replica holding the Lease
// observes the cluster into it, each records the claims it deletes, and
// OpenPostgres reads it, the reports the file's. A replica may die while
// others live, so each open interval names its writer and each writer has
// its own alive mark: a writer ends, at start and on every alive tick,
// only the open intervals of writers whose mark is older than DeadAfter,
// as ending at an unknown time bounded by that mark; a live writer's stay
// open. One advisory lock serialises the writers' transactions.
//
// Totals gives the time per pool and state since the Ledger was opened,
// from memory, for the runtime's sandbox_state_seconds metric.
//
// Records reads a ledger. Pool gives, for a pool and a window, the time
// and cost per state (open intervals to the window's end; intervals of a
// killed runtime with their uncertain tail apart), storage in GiB-hours,
// warm hits and cold starts, the warm-hit fraction and the unused warm
// minutes. Run gives a run's cost terms: active compute, the warm idle
// time of the member it took, its workspace storage, and, named unknown
// with the reason, network egress (bytes measured, no price), model tokens
// and node overhead. Prices come from tenancy.Pricing (pricing.yaml): a
// price left out makes its term unknown, never zero, and a report's Known
// is never presented as a total while a term is unknown.
//
// It is not a bill: it holds no tenant, budget or invoice (the control
// plane reserves and charges a job's active time against its tenant's
// budget), and it reads no cluster itself (package serve hands it what
// the cluster says).
package cost
