// Package control is Slipway's control plane: authenticated tenants,
// durable job intent, an admission queue with backpressure and fair
// sharing, per-tenant concurrency, deadlines, output and spend limits, and
// versioned capability profiles. It is its own process (`slipway control
// serve`); it dispatches admitted jobs to the execution plane (one or more
// `slipway runtime serve`) through the runtime's HTTP API, and only it
// holds runtime credentials.
//
// A job is stored before anything happens to it (Store, on SQLite or
// PostgreSQL through one database/sql implementation), with its tenant,
// pool, the capability profile by name and the config revision and digest
// it resolved to, its commands, deadline and limits. Its states are
// queued, admitted, allocating, running, the terminal succeeded, failed,
// canceled, deadline_exceeded and refused, and the visible non-terminal
// unknown (with an owner and a deadline). Every transition is committed
// before its effect.
//
// Admission is Slipway's: bounds are counted in the database and taken
// with a conditional update (a submit over the global or the tenant's
// queue bound, or whose worst-case cost does not fit the tenant's budget,
// is a 429 with Retry-After and the reason); a freed slot goes to the
// tenant with the fewest active jobs that has one queued, so a tenant that
// floods the queue only delays itself. Dispatch is River's: a bounded
// worker pool, retries with backoff within the attempt budget.
// The claim carries a request key (job id and allocation attempt); a
// replica that dies leaves a lease that runs out, and the recoverer
// re-dispatches an allocating job with the same key (adopting the sandbox
// the dead owner may have made) and ends a running one unknown: its
// commands never run twice.
//
// Each job has one ordered, durable event stream (internal/store):
// sequences taken in the append transaction, a state event in every
// transition's transaction and the result event last, output appended as
// produced (internal/stream), retention of output chunks by time and
// size, consumer cursors with acknowledgement, and Server-Sent Events
// that resume from Last-Event-ID (sse.go, encoded by internal/stream).
//
// Telemetry (pkg/telemetry): each job has one trace (admission, claim,
// sandbox ready, runner awake, each command, release, under a root span
// written when the job ends) whose spans carry job_id, run_id, session_id,
// allocation_attempt and sandbox_id, as do the JSON log lines about the
// job; GET /v1/jobs/{id}/trace reads this replica's ring of spans, and
// GET /metrics (operators) the job-end metrics with bounded labels.
//
// The output worker (internal/delivery) is a consumer of those streams per
// tenant destination: in order per job, rate-limited, retried with backoff
// and Retry-After, each attempt with an idempotency key and a signature
// (package deliver, which also filters the text), the receipt stored
// before the acknowledgement; a job's result is published (validated
// delivery) once every destination that requires it
// returned its receipt of the result.
//
// Layout: this package is the plane's composition (Plane, Config, the
// config repository's reader, Serve) and its HTTP server (api.go, sse.go)
// over internal/jobs (the job engine: submission, admission, dispatch,
// cancellation, recovery and each job's trace; it alone talks to the
// runtime), internal/delivery (the output worker), internal/stream (a
// job's output as events) and internal/store (the tables, group commit and
// event hub), each importing only those below it. Store is the narrow view
// of the database a program beside the plane needs (tokens, jobs and their
// events read back). The wire types and the HTTP client are
// pkg/api/controlapi.
//
// What it is not: the runtime (pkg/execution/runtime) and the configuration's
// parsing (pkg/config/tenancy).
package control
