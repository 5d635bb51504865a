// Package render turns a pool's desired state at a config revision into
// Kubernetes objects for agent-sandbox (sigs.k8s.io/agent-sandbox v0.5.6,
// extensions.agents.x-k8s.io/v1beta1), through kustomize's API (krusty).
//
// Pool reads pools/<p>/pool.yaml and desired.yaml, and the generations
// desired.yaml lists, and verifies every image pin of every listed
// generation against the tree's policies/verification.yaml (package
// policy, as the runtime does; WithVerifyCache shares results keyed by
// image digest and policy). If one generation does not verify, nothing is
// rendered: the error (a *NotVerifiedError) names each generation, pin and
// failed check.
//
// Per generation it generates a SandboxTemplate named <pool>-<first 12
// hex of the id>, whose pod runs the workspace template image by digest
// with the runner brought in by digest from its own image (an init
// container runs `slipway-runner install` into an emptyDir, mounted
// read-only at RunnerDir in the workspace container, whose command is that
// runner serving the runner protocol on a unix socket at RunnerSocket, in
// an emptyDir of its own, with the generation in $SLIPWAY_GENERATION and
// the pod's name, the sandbox's id, from the downward API in
// $SLIPWAY_SANDBOX_ID: the runtime reaches it through pod exec, see
// package kubesandbox; the same init container writes the pod's
// refresh phase, a fresh machine id, into a memory emptyDir at RefreshDir,
// mounted read-only by subPath over /etc/machine-id: no random seed or ssh
// host keys in a pod, see RefreshDir), the runtimeClass
// pin's id as runtimeClassName, the nodeImage pin as a node selector when
// pool.yaml sets spec.kubernetes.nodeImageLabel, the secretVersion pin as
// a projected Secret named by SecretName, mounted read-only at SecretDir
// (/run/slipway/secret), with a writable memory emptyDir at
// sandbox.CredentialDir (/run/slipway/credentials) where the runtime puts
// each claim's token through pod exec, and the pool's network as the template's
// networkPolicy (no ingress; egress only to the allow-list, whose entries
// must be IP:PORT or CIDR:PORT: a host name is refused, since a network
// policy selects by address). Warming and active generations also get a
// SandboxWarmPool of the generation's warm size (updateStrategy
// OnReplenish: a generation is never edited, so Recreate is never needed);
// draining and retained ones keep their template only.
//
// Every sandbox pod meets Pod Security "restricted": it runs as
// kubeobjects.SandboxUID (runAsNonRoot, whatever the template's USER
// says), under the container runtime's default seccomp profile, each
// container without privilege escalation and with every capability
// dropped, and no service-account token. Its working directory is an
// emptyDir at kubeobjects.WorkspaceVolumeDir (sized by the pool's
// limits.workspace), writable through the pod's fsGroup, into which a
// second init container of the template's image copies the template's
// own folder there (kubeobjects.SeedInitContainer). A Namespace in
// the render gets the labels by which the API server enforces, warns and
// audits that level (kubeobjects.PodSecurityLabels); a kustomization
// setting one of them to another level is an error. An allow-list pool's
// pod also runs its egress proxy (kubeobjects.EgressContainer: the runner
// image's `slipway-runner egress`, as a user of its own) on
// sandbox.EgressProxyAddr, which HTTP_PROXY and HTTPS_PROXY of the
// workspace container name: it enforces the allow-list for what goes
// through it and logs every attempt, while the network policy holds the
// same destinations for what does not.
//
// The generated objects are added as one more resource of the pool's own
// kustomization.yaml (in an in-memory copy of the tree, without the pools'
// generations and evidence folders), so its namespace, labels, patches and
// name prefixes apply to them too; a kustomize configuration keeps a warm
// pool's sandboxTemplateRef in step with a renamed template. A
// transformer that changes a pinned image or the generation label is an
// error: pins are not overridable. Every object gets the label
// slipway.dev/pool and the annotation slipway.dev/config-revision; a
// generation's objects and pods also carry slipway.dev/generation (the id
// cut to 63 characters) and the annotation slipway.dev/generation-id. The
// pool's own objects carry no generation label: they belong to no one
// generation.
//
// For Argo CD, a generation's SandboxTemplate carries the sync wave
// WaveTemplate and its SandboxWarmPool WaveWarmPool, so a warm pool is
// created after the template it names (the pool's own objects keep their
// kustomization's waves, 0 by default). Retained and draining generations
// are not marked Prune=false: their templates stay in the render for as
// long as desired.yaml lists them, which is until gc takes them out when
// their rollback and restore windows have closed; Argo CD reads
// Prune=false from the live object, so the mark would keep them in the
// cluster after gc, and the window cannot be computed without a clock.
// DirTree reads a checked-out directory (Argo CD's plugin contract) as a
// Tree.
//
// The output is a pure function of the tree: no clock, sorted by kind
// (Namespace, the pool's own kinds, SandboxTemplate, SandboxWarmPool),
// then namespace and name, byte-stable.
//
// It does not apply anything to a cluster, and imports nothing above
// package policy.
package render
