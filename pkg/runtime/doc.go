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
package runtime
