// Package kubeobjects is the contract between what Slipway renders into a
// cluster and what reads it back: the labels and annotations on every
// rendered object, the agent-sandbox API version and kinds, the names of a
// generation's SandboxTemplate and SandboxWarmPool, and where a pod finds
// the runner, its socket and a secret version.
//
// Package render writes objects with these names; the Kubernetes sandbox
// backend (package kubesandbox), the rollout fleet and the reconciler read
// them. It imports only the standard library, so a reader of the cluster
// does not import the renderer (kustomize, the verification policy and
// signing).
//
// It is not the renderer: building objects from a pool's generation is
// package render's.
package kubeobjects
