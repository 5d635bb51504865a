// Package serve runs Slipway's runtime: it follows the config repository,
// keeps the warm pools on the local (bubblewrap) backend, or claims on
// agent-sandbox's warm pools with the Kubernetes backend (Config.Backend),
// and serves the runtime's API. It is what `slipway runtime serve` runs;
// package runtime holds the parts, independent of the backend, so that
// rollouts and clients never import one.
package serve
