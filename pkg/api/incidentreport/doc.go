// Package incidentreport is the wire shape of an incident report, one for
// both servers that serve one: the control plane's GET /v1/incidents (from
// its store: jobs that crashed, hung, were delivered twice, ...) and a
// runtime's (from its run manifests and cleanup records: credentials that
// expired while a run was open, request keys with more than one run,
// deletes whose outcome is unknown), and `slipway incidents -o json`. A
// console merges reports from several servers by kind.
//
// It is a contract package: it imports only the standard library. It does
// not find incidents (pkg/control/incidents does, from the stores) or
// serve them (each server's API does, its client reads them: controlapi,
// runtimeapi).
package incidentreport
