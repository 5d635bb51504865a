// Command tiny is built by the tests into a fixture root filesystem, so that
// syft finds a Go binary with one dependency module in it. It is test data,
// not part of Slipway.
package main
