// Package reconcile is the cleanup reconciler that runs beside each
// runtime: level-triggered, every pass reads the authoritative state (the
// run store, the sandbox backend's List, the desired warm generations, the
// credential broker's live credentials, its own open records) and cleans
// up what has no live owner, so that a leak is caught while the runtime
// runs, not only when it starts again.
//
// Sweepers on the local backend (one Kind each):
//
//   - sandbox-no-lease: a sandbox owned by a run the store does not know
//     (the worker died after creating it), after a grace for running ones
//     (a claim records its manifest just after taking a sandbox);
//   - lease-terminal: a sandbox still leased to a final run (a lease, on the
//     local backend, is the sandbox's owner record: the run id, with the
//     run's allocation attempt as its version);
//   - fenced-sandbox: a sandbox of an earlier allocation attempt of an open
//     run, whose runner still answers (a claim routed to a fenced sandbox;
//     after the grace, as a move records its new sandbox just after making it);
//   - dead-sandbox: a sandbox whose processes are gone;
//   - warm-inactive: a warm member of a generation its pool keeps warm no
//     more (never while the desired state is unknown);
//   - stuck-stopping: a sandbox taken out of its pool to be deleted
//     (owner "retiring" or the reconciler's own "reaping:") or whose
//     deletion began (the local backend's .deleting-<id>), still there after
//     StuckAfter;
//   - credential: a credential the broker honours whose run is final, absent
//     (after the grace), or moved on to a newer credential: revoked.
//
// Workspaces go with their sandbox (they live in its folder, or a tmpfs
// under it), so the sandbox sweepers and stuck-stopping cover them.
// Checkpoints: none exist on the local backend (nothing writes one;
// workspace_checkpoint_id is never set), so there is nothing to sweep.
// Artifacts (images, signatures, attestations) live in registries, not
// under the state directory: their retention is `slipway gc`'s, which
// honours the rollback and restore windows; the runtime's runner and
// template caches are keyed by the digests in use and are not swept here.
//
// On a cluster backend (one that implements sandbox.Objects: Kubernetes)
// the cluster is the authority on what exists: each pass lists the
// namespace's SandboxClaims, SandboxWarmPools, Sandboxes, pods and run
// Secrets that Slipway made or rendered (or that those control), and each
// delete carries the UID and resourceVersion the pass read as its
// precondition, so an object changed since (re-claimed, relabelled) is
// refused by the API server and kept. A namespace may hold other
// runtimes' pools: only objects of the pools in this runtime's desired
// state are swept, none while it is unknown. Its sweepers:
//
//   - sandbox-no-lease: a claim of a run the store does not know and the
//     runtime does not hold (after the grace once it is ready; one not
//     ready is left to its Create until the backend's ready timeout);
//   - lease-terminal: a claim of a final run;
//   - fenced-sandbox: a claim bound to another Sandbox than its open run
//     records (after the grace);
//   - warm-inactive: the SandboxWarmPool of a generation its pool keeps
//     warm no more, and its members (never one created after the desired
//     state was read: it may come from a newer commit);
//   - unrecorded: a Slipway Sandbox or pod whose controller is gone (no
//     object of that name and UID), or that has none (after the grace);
//   - stuck-stopping: an object whose deletionTimestamp is StuckAfter past
//     (a pod whose kubelet never confirms is deleted at once, grace 0; an
//     object held by a finalizer stays, a cleanup unknown until the
//     finalizer clears: the reconciler never removes another controller's
//     finalizer);
//   - credential: a run's Secret (label slipway.dev/run) whose run is final,
//     or absent after the grace; and the broker's credentials, as above.
//
// A claim's delete takes its Sandbox and pod with it (no garbage collector
// is assumed), and returns once the cluster has none of them: a finalizer
// that never clears makes it time out, a cleanup unknown.
//
// Not applicable, with the reason: cloud instances not represented by a
// NodeClaim (Slipway has no cloud backend). Post-hooks (deliveries) with no receipt are the control
// plane's: its recoverer retries undelivered events (pkg/control); no
// sweeper of this package covers them.
//
// Every destructive action re-reads the authoritative record just before
// acting (the run, the desired warm generations), fences with the
// backend's owner compare-and-swap (a sandbox claimed or adopted since the
// pass read it keeps its new owner, and is left alone), is repeat-safe (a
// second pass finds nothing to do) and writes a record (kind, resource, run,
// lease version seen, action, state, outcome, owner, deadline, attempts,
// times) to cleanup.db in the runtime's state directory, or to PostgreSQL
// (schema slipway_cleanup) beside the run store the replicas share, where
// the next leader carries on the unknown records of the last. An action is bounded by ActionTimeout: one that fails or
// times out leaves a "cleanup unknown" record with the reconciler's owner
// (the runtime's name and listen address), a deadline, its attempts and its
// last error, logs an ERROR line, counts in cleanup_unknown_count{pool}, and
// is retried every pass until an attempt succeeds (the record is kept,
// resolved). Unknown is never turned into success without an action that
// succeeded or the resource found gone.
//
// It is not the runtime's warm loop (which keeps pools at size and retires
// old members every 500 ms; this is the backstop that finds what that and
// every other path missed), and it does not finalise run manifests (the
// runtime does that at start for the runs whose sandboxes died with it).
package reconcile
