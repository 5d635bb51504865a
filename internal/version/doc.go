// Package version says which build of a Slipway program is running: the
// release tag stamped at link time, or, for a build without one, a version
// derived from the VCS stamp Go embeds (v0.0.0-<commit12>[-dirty], untagged),
// with the commit, whether the tree was dirty, and the Go version.
//
// A release build links
//
//	-X github.com/slipway-dev/slipway/internal/version.version=v1.2.3
//	-X github.com/slipway-dev/slipway/internal/version.commit=<sha>
//	-X github.com/slipway-dev/slipway/internal/version.dirty=false
//
// (release builds use -buildvcs=false, so the stamp is the only source). It
// imports only the standard library: the runner links it.
package version
