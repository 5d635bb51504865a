// Package checkpoint writes a sandbox's workspace as a signed OCI artifact
// and restores it, verified, into another sandbox: suspend and resume,
// and restore onto a newer compatible generation.
//
// A checkpoint is an OCI image manifest of its own artifact type
// (ArtifactType) whose config (ConfigMediaType) is its Predicate and whose
// layers (uncompressed tars, LayerMediaType, hashed once as they are
// written and linked into the store, not copied) are the workspace: the first checkpoint of a workspace one layer
// of all of it, each later one its parent's layers plus one layer of what
// changed since (rootfs.Diff: added and changed files, deleted ones as
// whiteouts), so an unchanged workspace costs no new layer and layers are
// shared by digest. Beside it is an in-toto statement of PredicateType
// naming the run, the sandbox, the generation, its template digest, the
// job's event sequence and the time of the freeze, signed into a DSSE
// envelope (package sign) with the runtime's key. Its manifest digest is
// the run manifest's workspace_checkpoint_id.
//
// Create freezes the sandbox (Source.Freeze: the local backend's cgroup
// freezer) for exactly as long as it takes to copy the workspace, thaws
// it, then stores and signs. A workspace that the host cannot reach (a
// pod's, on Kubernetes) is copied out by the runtime first, its workload
// held still meanwhile, and Create takes that copy (Source.Taken and
// Frozen say when and for how long the sandbox was held). Restore refuses (ErrRefused, saying why) a
// checkpoint whose attestation does not verify with the given key, does
// not name it, disagrees with its config, or whose tenant, run or
// generation is not what the target expects; only then does it check each
// layer blob against its digest and unpack them with package rootfs (no
// path leaves the workspace, no device node is made).
//
// Only the workspace directory is copied: the credential tmpfs, /tmp and
// the template's read-only root are other mounts and never in a
// checkpoint.
//
// Store is an OCI image layout (the local runtime keeps one under its
// state directory). It records each verified restore (RecordRestore,
// LastRestore: question 6's "has restore been tested") and each suspend
// (RecordSuspend, LastSuspend), with the operator and the reason when an
// operator asked for them. Collect deletes
// the checkpoints whose restore window has closed, never one inside it
// nor one the caller keeps, and only the blobs no remaining checkpoint
// uses; CollectClosed says the window per checkpoint (the runtime's
// sweeper: each pool's restoreWindow; slipway gc --runtime reaches the
// same sweep through the runtime's API). CollectPublished does the same in
// a registry repository: each checkpoint whose window has closed goes with
// its signature and attestation, found by its cosign tags (or the local
// store's list, for one pushed but never signed), and one that does not
// verify with the runtime's key is left alone.
//
// Push copies a checkpoint to a registry by digest (layers, config and
// manifest byte for byte), then signs it and attaches its attestation with
// the same key, as a release signs its images (cosign's .sig and .att
// tags). Pull verifies a checkpoint in a registry before it writes
// anything (signature, attestation, its predicate against the config,
// tenant, run and generation), then copies it into a Store, layer by layer
// against their digests, with its signed attestation: Restore then
// verifies and unpacks it as any other. Kubernetes is not here yet.
package checkpoint
