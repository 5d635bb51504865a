// Package canary is a continuous canary of one pool of a runtime: on an
// interval it does what a job does, through the runtime's HTTP API, and
// says which step broke.
//
// A round claims a sandbox of the pool (claim); asks the runtime for its
// runner's identity, live, and checks it against the grant and the run
// manifest: the runner's binary sha256 is the pinned one the manifest
// records, its generation and sandbox are the grant's, and the file at the
// runner's path in the sandbox hashes the same (identity); reaches an
// approved destination through the sandbox's egress proxy, or directly
// where the sandbox has none (egress_approved)
// and is refused a denied one, both directly and through the proxy, with
// no allowed attempt to it in the manifest (egress_denied); writes a file
// in the workspace with one command and reads it back with another
// (workspace); streams a command's numbered lines and checks they all
// arrive, in order (output); and releases the claim, checking that the
// manifest completed with its resources released, the sandbox left the
// pool and the claim's token is refused (release). Each step is timed. A
// step that fails skips the ones after it, but the release runs whenever a
// claim was granted. Its commands need a POSIX sh, cat and rm in the
// workspace template, and the runner's probes for the network.
//
// Each round is appended to a History (a JSONL file bounded to a maximum of
// rounds), recorded in telemetry's canary metrics, and logged: a failing
// round is an ERROR line naming the pool and the step (the alert).
//
// It is not a rollout proof (package runtime's Prove runs those on a
// warming generation's member, as the runtime itself): a canary is an
// ordinary claim of the active generation, made by a client from outside,
// so it sees what a tenant's job would see.
package canary
