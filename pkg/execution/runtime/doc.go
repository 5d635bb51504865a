// Package runtime is Slipway's thin runtime: it consumes the generations
// in the config repository, keeps warm sandboxes of the active ones, hands
// them to claims, and records a run manifest for every run.
//
// This first part follows the config repository. Load reads the desired
// state at one revision: every pool's settings (pool.yaml), its state
// (desired.yaml) and the documents of the generations it wants warm or
// draining. Before anything of a generation is unpacked, its image pins
// are verified against policies/verification.yaml at the same revision
// (trust lives in the config repository); a generation that does not
// verify is listed as refused, with the reason, and never used. A Syncer
// polls the branch (every 2 s by default, and on Kick), keeps the last
// state that loaded with the time it was last confirmed current, and says
// when that view is too old to serve claims from (Stale).
//
// Warm keeps the warm pools on a sandbox.Backend: WarmSize ready members of
// each generation the state wants warm, created within the pool's refill
// rate and counting its own creates in flight, so concurrent reconciles
// never over-create. Members of a generation no longer warm are deleted,
// never changed in place. A claim takes a ready member of the pool's
// active generation, checked against the desired state at claim time,
// with a compare-and-swap of its owner; with none ready it cold-starts one.
// Release deletes the claim's sandbox: it never returns to the pool.
// RegistryArtifacts fetches templates and runners by the pinned digests.
//
// Runtime grants claims (refused with ErrStale when its view of the config
// repository is older than the maximum staleness) and records each claim's
// run manifest: every artifact of the generation, the config revision,
// the sandbox, warm or cold, and the lifecycle times. Each allocation
// attempt has a fencing token: Move gives a claim a new sandbox (attempt
// plus one, the old sandbox killed) and from then on requests carrying the
// old token are refused (ErrFenced). Release deletes the sandbox and
// completes the manifest.
//
// The runtime moves claims by itself too. At claim time a warm member or
// cold start that does not answer its runner's ping within the pool's
// readyTimeout is killed and replaced (within the claim's deadline), and
// a heartbeat monitor per open claim (WithHeartbeat; every second, three
// misses by default) moves a claim whose runner stops answering. Exec holds
// no lock while its command runs: a move cancels the command and refuses
// its result (ErrFenced), and Grant tells the claimant its new attempt and
// token. Close stops the monitors. When the generation pins a
// secretVersion, the local credential Broker issues a token per allocation
// attempt, written into the sandbox's own tmpfs at
// /run/slipway/credentials/token (mode 0400, the sandbox's user), revoked
// on move and release; the manifest records only its receipt.
//
// On a backend whose cluster keeps the warm pools (sandbox.ClusterPools:
// package kubesandbox), Warm creates no warm member: a claim is a Create
// on the active generation, a proof claim a Create marked as a proof on
// the warming one, pool status counts the cluster's warm members, and the
// run manifest records where the backend says the sandbox runs.
//
// A claim request may carry a request key (ClaimRequest.RequestKey, the
// API's requestKey): while the claim it made is open the same key adopts
// it (the same grant, Adopted, HTTP 200), concurrent requests with one key
// make one claim, and a key whose claim has ended is refused
// (ErrRequestKeyUsed, HTTP 409). Replicas sharing a run store (WithAddress)
// pass a key whose claim another replica holds open on to that one, which
// adopts it. The key is the run manifest's
// request_key, queryable (GET /v1/runs?request_key=).
//
// Exec stops a command at its timeout, or when it is cancelled, with
// SIGTERM, then SIGKILL after the grace (graceSeconds); the result's stop
// says "terminated" or "killed". With keepTail the API keeps each
// stream's first and last maxOutput/2 bytes in a bounded ring, with a
// line counting the bytes dropped between them (droppedBytes).
//
// Package serve (pkg/execution/runtime/serve) runs all of this as `slipway runtime
// serve` on the local backend (or the Kubernetes one), with the sandboxes and run manifests in its
// state directory; this package itself imports no backend, so rollouts
// and clients stay independent of one. Sandboxes die with the process
// that runs them, so a runtime killed outright leaves dead sandboxes and
// open runs: when it starts again on the same state it reaps the dead
// sandboxes (sandbox.Reap) and finalises every open run (granted or
// running) whose sandbox is gone as failed, its resources released at the
// reap time, keeping everything else it recorded; a run whose sandbox
// still exists stays open. Stopping it deletes the sandboxes and
// finalises their runs the same way.
//
// WithLedger gives Warm a StateLedger (package cost's Ledger, which serve
// keeps in the state directory on the local backend): every sandbox it
// creates, hands to a claim or a proof claim, and deletes is recorded as
// warm idle, active (with its run) or proof, for cost by state.
//
// For rollouts: Prove runs proof checks (allocate, identity, network,
// template-tests, workspace-writable, cleanup) on a proof claim, a ready
// warm member of a warming or active generation that never counts as
// traffic and has no run manifest; Stop ends a generation's open claims
// at a drain deadline; the API serves both with Info (protocols, observed
// revision) and pool status (per generation: counts, open runs,
// sandboxes), and runtimeapi.Client implements rollout.Fleet.
//
// The API's contract (every request and answer type, the error codes,
// the Client) is package runtimeapi (pkg/api/runtimeapi), which imports
// only the standard library: a program that only talks to a runtime
// imports that, not this package. The server answers errors as
// runtimeapi.ErrorBody, with the code of the sentinel error at fault
// (ErrStale is "stale", ErrFenced "fenced", ...) and its reason; an error
// with no such code is answered as "internal error (error id e-...)",
// and its detail (host paths, command lines) is written to the runtime's
// log under that id only.
//
// Credentials (credentials.go, renew.go): the broker's tokens expire after
// their lifetime; the runtime renews an open claim's at RenewAt of it and
// revokes the old one, recording both receipts; Check (POST
// /v1/credentials/check) tells a provider why a token is refused. The
// policy view (GET /v1/policy) shows the config revision in effect, its
// age and the rules. Still to come: a broker that hands out a secret
// store's value for the pinned version instead of a token of its own.
//
// Tracing and logs (tracing.go, runlog.go): a request's W3C traceparent
// header is the parent of the runtime's spans for it (WithTracing): its
// claim (sandbox ready, credential issue, runner awake), each command
// (the runner's exec and start, from the timing the runner returns) and
// release, with run_id, session_id, allocation_attempt and sandbox_id.
// The command reaches the runner with the traceparent of its runner exec
// span, which the workload gets as TRACEPARENT. GET /v1/traces/{id}
// serves the spans the ring holds, for the control plane's job trace.
// With WithLogger, the lines about a run are records with the same ids
// and the trace id.
package runtime
