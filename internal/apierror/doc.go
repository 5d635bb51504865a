// Package apierror decides what an HTTP API's error answer tells its client
// and what stays in the server's log.
//
// A refusal the client can fix (a body that does not parse, a field, pool
// or limit out of range, a claim that is not open) is told as it is: the
// caller says so. Anything else is an internal error: the client is told a
// reason and an error id, and the full error (which may name host paths,
// a bubblewrap command line or other internal state) goes to the server's
// log under the same id. An *Error carries a reason written for the client
// beside the detail kept for the log.
//
// It is not the wire format: the runtime's is runtimeapi.ErrorBody, the
// control plane's controlapi.ErrorBody, each with its "id" field.
package apierror
