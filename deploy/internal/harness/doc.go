// Package harness is what the in-cluster tests of the install (deploy/ and
// the packages under deploy/test) stand on: a real single-node cluster
// that routes Services (testharness/kubetest), a registry on the node's
// bridge holding a snapshot release of this tree pushed and signed by
// digest, the host's PostgreSQL and a git server reachable from pods, and
// Slipway's planes installed from deploy/'s overlays with that release's
// images (Env, Start, InstallPlanes, JobPlanes).
//
// It is for tests only: every function takes a testing.TB and fails the
// test on error, and it lives under deploy/internal so nothing outside
// deploy/ imports it. It is not the operator's install (docs/install-kubernetes.md
// is), and it proves nothing by itself: the tests that use it do.
package harness
