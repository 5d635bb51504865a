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
// Still to come: moving on missed heartbeats and the ready timeout by
// itself, the credential broker, the HTTP API and its client.
package runtime
