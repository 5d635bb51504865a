// Package gittest serves real git repositories for tests and benchmarks:
// bare repositories made by the git CLI, served over smart HTTP on
// 127.0.0.1 by git's own http-backend (through Go's net/http/cgi), so that
// pushes and fetches cross the real protocol and git itself decides what it
// accepts (ListenAlso serves them on another address too, for a test
// cluster's pods; Serve serves a program's own folder, without a test). It also runs the git CLI to read results back (git fsck, git log).
//
// It needs the git CLI (Debian package git) and is for tests only: it is
// not how Slipway itself reads or writes a config repository (package
// gitops, on go-git, does that).
package gittest
