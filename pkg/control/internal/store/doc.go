// Package store keeps the control plane's durable records in one
// database/sql implementation over SQLite (modernc.org/sqlite, no cgo) and
// PostgreSQL (pgx's stdlib driver): jobs and their transitions, tenants'
// counters and the admission that takes them (a conditional update per
// slot), idempotency keys, tokens and the audit log, the jobs' event
// streams (sequences taken in the append transaction, segments, retention,
// consumer cursors, and the hub that wakes followers: LISTEN/NOTIFY on
// PostgreSQL, an in-process broadcast on SQLite), the output worker's
// receipts, progress and artifacts, and the group commit that batches
// submissions, appends and transactions.
//
// It is internal: its exported names are what the plane (pkg/control)
// and its other parts (internal/delivery, internal/stream) call, not an
// API. Programs use pkg/control's Store and Open, which name this one.
//
// What it is not: the River queue (the plane opens it on the same
// database), the HTTP API, or any decision of the plane's beyond what a
// transaction must decide (bounds, fair admission, fencing by lease).
package store
