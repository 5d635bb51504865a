// Package delivery is the control plane's output worker: a consumer of
// the jobs' event streams per tenant destination that delivers each event
// in order, rate-limited, retried with backoff and Retry-After, each
// attempt with an idempotency key and a signature (pkg/control/deliver),
// its receipt stored before the acknowledgement; and View, which says how
// a job's deliveries stand (validated delivery: a result is published
// once every destination that requires it returned its receipt).
//
// It is internal to the control plane, run by pkg/control's Plane. What
// it is not: the filtering and signing of one message (pkg/control/deliver)
// or the storage of receipts (internal/store).
package delivery
