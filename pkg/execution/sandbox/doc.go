// Package sandbox is the seam between the runtime and whatever runs
// sandboxes: a small Backend interface (Create from a generation's pins,
// List with pool, generation and owner, SetOwner when a claim takes a warm
// sandbox, Delete, Health), the Sandbox it returns, and the runner's own
// OCI image.
//
// A Sandbox carries its pool, generation and owner in the backend's durable
// state, so a restarted runtime finds every sandbox again with List, living
// or dead, and Reap deletes the dead ones. It talks to the sandbox's runner
// (package runner: identity, exec with bounded streamed output, ping for
// heartbeats) through one connection per call.
//
// The runner is an artifact of its own, pinned separately from the
// template: RunnerImage makes its image (one layer holding the binary at
// RunnerPath, the binary's sha256 in LabelRunnerSHA256 and its protocol
// version in LabelRunnerProtocol), and UnpackRunner takes the binary back
// out, refusing one whose hash is not the label's. A backend's Create then
// proves that the running runner is that binary and was started for that
// generation and sandbox.
//
// A backend that can place a claim's credentials in a running sandbox
// (a file in the sandbox's own tmpfs at CredentialDir) implements
// Credentials besides Backend; the runtime's credential broker asserts it.
//
// A backend whose cluster keeps the warm pools implements ClusterPools:
// the runtime then creates no warm member and claims with Create; its
// sandboxes say where they run (Placement) for the run manifest.
//
// It is not a backend itself (see package local for bubblewrap on this
// host, package kubesandbox for agent-sandbox on Kubernetes), and it does not
// choose generations, warm pools or claims: that is the runtime's
// business, as a client of Backend.
package sandbox
