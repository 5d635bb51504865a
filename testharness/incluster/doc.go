// Package incluster installs Slipway's planes into a cluster the way an
// operator does (docs/install-kubernetes.md): a snapshot release of a
// source tree (built once per commit and kept in the user's cache folder,
// or built for one run when the tree is dirty), its images pushed to a
// registry by digest and signed, the kustomize build of one of the
// install's overlays (deploy/overlays/single or ha) with the base's image
// entry pinned to the pushed digest and the settings ConfigMap's data set,
// the Secrets the install reads created first, everything server-side
// applied in the order kubectl applies it, and a wait until the
// Deployments have their Ready pods (their pods' state and logs in the
// error when they do not). Services are reached at their cluster IPs, as
// a node that routes Services (kubetest.WithServices) lets the host reach
// them.
//
// Every function returns an error and takes no testing.TB: a test
// (package deploy's) and a program (make demo-kube) call the same steps.
//
// It is not an installer for production: it applies with a field manager
// of its own and Force, reads Secrets' values from its caller, and the
// registry it starts (BridgeRegistry) keeps images in memory. It does not
// start a cluster, a database or a git server: packages kubetest, pgtest
// and gittest do.
package incluster
