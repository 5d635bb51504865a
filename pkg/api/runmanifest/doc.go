// Package runmanifest is the run manifest: the immutable record of
// everything a run used (the identities of its software by digest or
// immutable id, where it ran, receipts of the credentials it was issued,
// when each step of its life happened), and the types that travel with it
// between a runtime, its stores and its clients: Status and EndStatus,
// Receipt, Lifecycle and its Steps, Fence, EgressAttempt, Limits, the
// operator's Query, a template's Package, and Change.
//
// ParseManifest decodes a manifest strictly (unknown fields, trailing data,
// a value that looks like a token where a receipt wants a version are
// refused, wrapping ErrInvalid); Validate applies the same checks to a
// manifest built in Go. Credentials appear only as receipts: a receipt
// cannot hold anything else.
//
//	m, err := runmanifest.ParseManifest(doc) // as GET /v1/runs/{id} returns it
//	for _, s := range m.Lifecycle.Steps() { fmt.Println(s.Name, s.Took) }
//
// It is a contract package: it imports only the standard library, so that a
// program that reads or queries manifests (a CLI, a control plane, a
// canary) does not link a database. It does not store manifests
// (pkg/execution/runs keeps the Store interface and its SQLite and
// PostgreSQL stores), it does not decide anything about a run (the runtime
// does), and it keeps no secret: there is none in a manifest.
package runmanifest
