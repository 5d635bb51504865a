// Package controlapi is the control plane's API contract: the wire types
// tenants and operators send and receive (a job's Spec, the Job record and
// its State, the Event stream and its kinds, delivery receipts and status,
// the Cancellation record, token scopes, and ErrorBody with its stable
// Code) and Client, the HTTP client of that API (submit, get, list,
// cancel, wait, and Follow, which reads a job's Server-Sent Events and
// resumes with Last-Event-ID by itself).
//
// It imports only the standard library, so a program that only talks to a
// control plane (a CI step, a tenant's tool, a destination that receives
// Message bodies) stays small: no database drivers, no queue, no
// Kubernetes, no signing.
//
// What it is not: the server, its store or its queue (pkg/control and the
// packages under it), and the runtime's API (the execution plane's). The
// types here change only compatibly: a field is added, never renamed; an
// event kind is added only with a new EventsVersion.
package controlapi
