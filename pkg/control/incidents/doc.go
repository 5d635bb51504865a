// Package incidents reads Slipway's durable records (the control plane's
// database, and a runtime's run manifests) and lists, per incident kind of
// the seed's table-top, the jobs and runs that show it, with their
// evidence: state, reason, owner and deadline while an outcome is
// unconfirmed, attempts, receipts, and the next action. It is what
// `slipway incidents` prints.
//
// The kinds: an agent that hangs (its job ended deadline_exceeded, the
// stop outcome and the bounded output kept); a worker that crashes after
// the runtime created its sandbox (the job adopted its claim by request
// key, or ends unknown with an owner and a deadline; a request key with
// more than one run is a doubled sandbox); a credential that expires
// while its run is open (or was renewed before it did); policy
// propagation that lags (claims refused because the runtime's view of the
// config repository was stale); an artifact export that fails (a
// delivery that spent its retry budget or is being retried, with the
// job, run and the digest of what it carries); and a delete that times
// out (cleanup unknown).
//
// Each kind's records come from a Source; one that is also Covering says
// which kinds it reads, so a kind no source read is marked (Sourced false)
// rather than shown as empty. The reconciler's cleanup-unknown records
// are one more Source (FromCleanup: kind CleanupUnknown, Covering it),
// which the CLI passes to Collect beside FromControl and FromRuns when the
// runtime's reconciler records exist. Runtime is the report a runtime
// serves on its GET /v1/incidents: FromRuns and FromCleanup over its own
// records.
//
// What it is not: it changes nothing, asks no live process, and does not
// decide what to do; it shows the evidence and names the owner.
package incidents
