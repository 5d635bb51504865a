// Command pintree times lint (Find and Lint) or pin (Find and Plan, the dry
// run of `slipway pin`) over a tree, in a process of its own, and prints the
// CPU and wall time per operation with what the operation found. It is the
// program both sides of BenchmarkMixedTreeVsBefore (pkg/release/pin) run:
// that benchmark builds it from this tree and, with its import paths moved,
// from the tree of an older commit, and runs the two in turn on the same
// files. It uses only what the pin package had before issue 42 (Find, Lint,
// Plan, Tree.Sites), so that it builds on both sides unchanged but for the
// paths.
//
//	pintree -op lint|pin [-n N] [-warmup N] [-out FILE] [-cpuprofile FILE] DIR
//
// It prints one line of key=value pairs: files, sites, findings (lint) or
// changed files and changes (pin), ops, cpu-ns/op (user and system time of
// the process, every thread and the garbage collector included, over the
// timed operations), wall-ns/op, the bytes and objects allocated and the
// garbage collections per operation. -out writes what the last operation
// found, one line each, sorted: "file:line:col ref" for lint,
// "file:line:col from to" for pin.
package main
