// Package kubesandbox is the Kubernetes sandbox backend: sandboxes are
// agent-sandbox's (sigs.k8s.io/agent-sandbox v0.5.6), made from the
// SandboxTemplate and SandboxWarmPool package render makes per generation.
//
// Backend implements sandbox.ClusterPools: the cluster keeps the warm
// pools, so Create makes claims only. A claim is a SandboxClaim
// (extensions.agents.x-k8s.io/v1beta1) named ClaimName(owner), whose
// warmPoolRef is kubeobjects.ObjectName(pool, generation), labelled
// LabelClaim, kubeobjects.LabelPool and kubeobjects.LabelGeneration (and
// LabelProof for a rollout's proof claim, which never counts as traffic).
// Create watches it (the watch opened beside the claim's create) until it
// is bound and Ready (agent-sandbox hands it a ready warm member, or
// cold-starts one where none is ready; Ready as the claim says, or as the
// Sandbox it names says once that is controlled by it: readyClaim), reads
// the Sandbox and pod it is bound to from ProveWarm's watches of the
// namespace when they run (from the API server when they do not, or when
// what they hold fails a check), checks the pod's images against the
// pinned digests (status imageID) and the runner's identity (proved once
// per warm member when it became Ready, by ProveWarm, while its pod and
// workspace container are the same; else on the claim's path), and records
// the placement for the run manifest: cluster, namespace, node, node
// image, runtime class and launch type (warm or cold from agent-sandbox's
// launch-type label; a cold start on a node that joined after the claim is
// a new node). A claim that is not ready by its deadline
// (WithReadyTimeout) is deleted with its claim object. A claim of that
// name already there, of the same owner (a runtime that was killed
// mid-claim), is taken up. List reads Slipway's claims, Delete deletes a
// claim, its Sandbox and pod (without waiting for a garbage collector) and
// returns once they are gone, WarmCounts reads the warm pools' status.
// With WithReleaseObserver, every claim the backend deletes while bound to
// its Sandbox (Delete, a failed Create's cleanup, DeleteObject), and every
// Sandbox DeleteObject removes by itself, is reported once it is gone,
// with the claim and Sandbox as read for the deletion: the cost ledger's
// record of what lived too short for its sampler to see.
//
// DialRunner reaches a pod's runner through the API server's pod exec,
// not the pod network: the workspace container's command (set by render)
// is the runner serving the unchanged runner protocol on a unix socket in
// a small emptyDir, and every connection is a pod exec of `slipway-runner
// connect` on it, whose stdin and stdout are the connection. Why: warm
// members are made by agent-sandbox's controller from one shared template,
// so no per-sandbox secret can be in their spec; pod exec rides
// Kubernetes authentication, RBAC (pods/exec) and audit; and the pod opens
// no port on a network shared with untrusted neighbours. The runner learns
// its sandbox id (the pod's name) from the downward API and its generation
// from the template. The connection a warm member's identity was proved
// over (ProveWarm) stays open while the member is warm, pinged once a
// minute, and is handed to its claim's heartbeat (runner.Client.Keep), so
// a warm claim opens no pod exec at or after its grant; one whose exec
// ended is not handed over, and the heartbeat dials its own (kept.go).
//
// Backend implements sandbox.Credentials too: PutCredential is a pod exec
// of `slipway-runner credential put NAME` whose standard input carries
// the data (never its arguments, environment, a log or an error); the
// runner writes it atomically, mode 0400, in sandbox.CredentialDir, the
// memory emptyDir render mounts there for a generation that pins a
// secretVersion, as the container's user. RemoveCredential is the same
// with `credential rm`; a pod that is gone has nothing to remove.
//
// A claim's spec names its pool's network: an allow-list claim is handed
// only a pod that runs render's egress proxy container
// (kubeobjects.EgressContainer) with that very list, a deny claim only a
// pod without one. With WithEgressRecorder, Create follows that
// container's log (one JSON line per attempt) through the API server and
// passes every attempt on, the last ones before Delete returns, as the
// local backend does with its host-side proxy.
//
// Backend implements sandbox.WorkspaceStreamer, the checkpoints' form for
// a workspace in a pod (delete and restore; checkpoint.go says why not
// agent-sandbox's suspended mode): Freeze stops the workspace
// container's workload with SIGSTOP through a pod exec of
// `slipway-runner workspace stop` and lets it go on when that exec's
// stdin ends; WorkspaceTar and RestoreTar are pod execs of `workspace tar`
// and `workspace restore` on kubeobjects.WorkspaceVolumeDir.
//
// It is not the runtime (which grants claims and records manifests on any
// backend), and it applies nothing: render and kubeapply (or Argo CD) put
// the templates and warm pools in the cluster.
package kubesandbox
