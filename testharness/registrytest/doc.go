// Package registrytest runs real OCI registries for tests and benchmarks, in
// the spirit of net/http/httptest.
//
// Distribution is Debian's docker-registry (CNCF distribution 2.8) running as
// a child process on 127.0.0.1 with its storage in a temporary directory: the
// same server code that backs many production registries, not an in-memory
// imitation. NewDistribution starts one for a test and stops it at cleanup.
//
// FaultProxy is a reverse proxy on 127.0.0.1 that sits in front of any
// registry URL and injects faults for real: added latency, 429 with
// Retry-After, 5xx answers, connections reset with TCP RST, and requests that
// hang. It counts what it saw (requests, faults served, the peak number of
// requests in flight) so that tests can prove retry, back-off and concurrency
// behaviour against a real server rather than a fake.
//
// It is not a registry implementation, a mock or a recorder of canned
// answers, and it is not for production use: nothing here speaks TLS or
// authentication, everything listens on the loopback interface only, and the
// fault proxy keeps a log of every request in memory. For an in-process
// registry without a child process, see go-containerregistry's pkg/registry.
package registrytest
