// Package runtimetest builds what tests of the runtime and of rollouts run
// on: a real runner image (the slipway-runner binary, built static) and a
// busybox workspace template, pushed to a registry, and generations of
// them. Tests only: it runs no runtime and starts no sandbox itself (the
// tests do, with package runtime and a sandbox backend).
package runtimetest
