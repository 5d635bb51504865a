// Package resolve turns image references into pins: tag to digest, with
// the lock file that records where each pin came from.
//
// The one interface is Resolver. Registry is the implementation that asks a
// registry (go-containerregistry: HEAD, falling back to GET; the docker
// credential keychain; plain HTTP on loopback). Everything else wraps a
// Resolver and is itself one, ko style: Limit bounds look-ups per registry,
// Dedupe shares concurrent look-ups of one reference, Cache remembers them,
// Record writes them into a Lock, and Hermetic answers only from a Lock and
// never touches the network. Stack composes the usual three.
//
// Retries live below, in the HTTP transport that Registry builds: 408, 429,
// 5xx, timeouts and broken connections are retried with exponential backoff
// and jitter up to a bound on attempts; Retry-After is honoured, and a 429
// cools the whole host down, not only the refused request.
//
// It does not find or rewrite references in files: that is package pin.
package resolve
