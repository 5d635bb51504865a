// Package argocd holds Slipway's Argo CD integration files (plugin.yaml,
// the repo-server sidecar patch, an example Application and
// ApplicationSet) and the tests that run them with Argo CD's own CMP
// server and clients. It is a module of its own so that Argo CD and its
// Kubernetes v0.31 pins never enter the root go.mod.
package argocd
