// Package kubefleet is a rollout.Fleet on a Kubernetes cluster running
// agent-sandbox v0.5.6: the seven steps of package rollout, driven against
// the SandboxTemplates, SandboxWarmPools, Sandboxes and SandboxClaims that
// package render makes of a pool.
//
// Sync has an Applier bring the cluster to the desired state the config
// repository's branch holds (RenderApplier renders the branch head with
// package render and applies it with package kubeapply; an Argo CD
// Application can be the applier instead), then reads the revision back
// from the slipway.dev/config-revision annotation of the pool's templates
// and warm pools as the cluster holds them: a step counts as done only when
// every one of them carries that revision, whatever the applier said.
//
// PoolStatus counts, per generation, the warm members (Sandboxes a
// SandboxWarmPool owns; ready by their Ready condition, the condition the
// warm pool's status.readyReplicas counts) and the open runs (bound
// SandboxClaims on the generation's warm pool). Claims labelled
// slipway.dev/proof=true are a rollout's proof claims and never count as
// traffic. A Sandbox belongs to a generation by its pod template's
// slipway.dev/pool and slipway.dev/generation labels, which package render
// puts there.
//
// Stop drains a generation by claim: it deletes the generation's claims,
// their bound Sandboxes and those Sandboxes' Pods, and returns once they
// are observed gone. Sync likewise deletes the members of the pool's warm
// pools that are gone (pruned when a generation stopped warming) and their
// Pods. Slipway does not wait for a garbage collector to do it: on a
// cluster that runs one the deletions are the ones it would make, and a
// rollout's step 6 ("the old warm capacity is gone") is then observed
// rather than assumed.
//
// Prove is delegated to a Prover: the runtime on the Kubernetes sandbox
// backend, which makes a proof claim on the new generation's warm pool and
// runs the checks through the runner in the pod.
//
// It does not render (package render), apply (package kubeapply) or decide
// anything about a rollout (package rollout).
package kubefleet
