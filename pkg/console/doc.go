// Package console is Slipway's operator console: a web view, served by
// `slipway console serve`, over the records the APIs already keep. It reads
// the control plane's API (jobs, their events, deliveries, cancellations,
// traces), each runtime's API (run manifests, pool status) and the config
// repository (pools, generations, rollouts), always with the caller's own
// control-plane token: a tenant sees only its jobs, an operator all.
//
// Pages are rendered on the server by html/template (output escaped, and
// terminal control removed and secret-looking values redacted the way the
// delivery filter does it); the stylesheet and one small script are
// embedded in the binary, so it works offline and needs no build step. The
// script follows a job's events and a running rollout over Server-Sent
// Events. Every response carries a strict Content-Security-Policy
// (script-src 'self', no inline script); the token lives in an HttpOnly,
// SameSite=Strict cookie; every POST carries a CSRF token. The console is
// read-only but for actions that need an operator token and a reason,
// which is recorded with the action: cancelling a job (its cancellation
// record, through the control plane's API), aborting a rollout and rolling
// a pool back (WithConfigWriter; the commits' Slipway-Actor and
// Slipway-Reason trailers, shown back from git), and suspending or
// resuming a run on a runtime that keeps checkpoints (the runtime's
// operator path, POST /v1/runs/{run}/suspend and /resume: the runtime
// records the reason and the operator with the suspend or the restore,
// and the run page's Durable section reads them back from its
// GET /v1/runs/{run}/durable). A rollback is driven by
// the Server on the runtime serving the pool, its evidence signed
// (WithEvidenceSigner) or unsigned (WithUnsignedEvidence); Close stops it.
// A pool's cost by state comes from each runtime's cost endpoint,
// incidents from the control plane's and each runtime's own (its run
// manifests' and cleanup records', GET /v1/incidents), each labelled by
// its source. A run's lineage draws the packages
// its runtime recorded from its artifacts' verified SBOM attestations
// (GET /v1/runs/{run}/packages), each linking the runs that share it
// (the runtime's package query), and each artifact's builder from its
// verified SLSA provenance ("no provenance" when the runtime found none).
//
// It is not an API of its own and stores nothing but the commits of those
// actions: every figure it shows is read from the servers at request time.
package console
