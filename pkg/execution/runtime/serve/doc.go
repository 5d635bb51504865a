// Package serve runs Slipway's runtime: it follows the config repository,
// keeps the warm pools, and serves the runtime's API. It is what `slipway
// runtime serve` runs.
//
// There is one composition per backend: RunLocal (bubblewrap on this host:
// the runtime keeps the warm pools, the cost ledger and the cleanup
// reconciler) and RunKubernetes (agent-sandbox in a cluster: the cluster
// keeps the warm pools, a claim is a SandboxClaim, the cleanup reconciler
// sweeps the namespace's objects, and the cost ledger is kept from the
// cluster's timestamps: each claim the runtime deletes is recorded as it
// goes, from the claim and Sandbox read for its deletion, and the cluster's
// objects are read every Config.StorageEvery for the rest: warm idle,
// retained, and claims another replica made and released, which that read
// sees only if they live across it). Each is a host (the
// backend and what it owns) handed to the composition they share; Run picks
// one by Config.Backend.
//
// It is not the runtime's logic: package runtime holds the parts,
// independent of the backend, so that rollouts and clients never import
// one.
package serve
