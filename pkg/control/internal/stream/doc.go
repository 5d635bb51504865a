// Package stream carries a job's events between the store and the
// outside: Output appends a running job's output to its event stream as it
// is produced (coalesced, within the job's output limit, with backpressure
// shared among the plane's open streams), Bounded keeps the head and tail
// of the output for the job's record, and AppendEventJSON, WriteSSEEvent
// and WriteSSE encode stored events as Server-Sent Events.
//
// It is internal to the control plane. What it is not: the store of the
// events (internal/store), the HTTP handler that follows a stream
// (pkg/control), the client that reads one (pkg/api/controlapi), or the
// filter and delivery of output to destinations (pkg/control/deliver,
// internal/delivery).
package stream
