// Package benchtable is how a benchmark hands its result to the one table
// `make bench` prints: each benchmark that names a target emits a Row
// (benchmark, Slipway's figure, the peer's, the ratio, the target, met or
// missed) with the machine's load average and CPU steal time over the
// measurement beside it, read from /proc/loadavg and /proc/stat.
//
// Emit prints the row as a "BENCHROW {json}" line and, when the environment
// variable BENCH_OUT names a file, appends it there as one JSON line; the
// program testharness/benchtable/print reads that file and prints the table
// in Markdown, as docs/benchmarks.md keeps it.
//
// It does not judge: the benchmark computes the ratio and says whether the
// target is met, from what it measured in the same run.
package benchtable
