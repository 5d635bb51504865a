// Package stream turns a running job's output into its event stream and
// its bounded output: Output appends chunks to the store as they are
// produced (coalesced, within the job's output limit, with backpressure
// shared among the plane's open streams), and Bounded keeps the head and
// tail of the output for the job's record.
//
// It is internal to the control plane. What it is not: the store of the
// events (internal/store), their Server-Sent Events (pkg/control), or the
// filter and delivery of output to destinations (pkg/control/deliver,
// internal/delivery).
package stream
