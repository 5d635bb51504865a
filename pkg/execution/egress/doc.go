// Package egress is a sandbox's egress allow-list: a policy parsed from a
// pool's network.allow entries and an HTTP proxy (CONNECT and plain HTTP)
// that enforces it after DNS resolution and records every attempt.
//
// An entry is "host:port" (a DNS name or an IP address), "CIDR:port"
// ("10.0.0.0/8:443") or "*.domain:port" (any name under domain, not domain
// itself). The proxy decides on the destination as asked before any
// lookup: a name no name entry lists on that port is refused and never
// resolved, so a sandbox cannot carry data out in the names it asks for.
// Only listed names are resolved (with Proxy.Resolver: the host's resolver,
// or ResolverAt's DNS server); the proxy checks every address it gets and
// dials the checked address, so a name that later resolves elsewhere (DNS
// rebinding) cannot reach past the check. A name entry allows public
// addresses only: a listed name that resolves to a loopback, private or
// shared address is refused unless an IP or CIDR entry lists that address.
// Link-local addresses (the cloud metadata services at 169.254.169.254
// and fd00:ec2::254 among them) are never allowed, whatever the list says.
//
// Proxy.Serve runs a proxy on a listener until its context ends, and then
// closes every connection, open tunnels included, so that each attempt is
// recorded before it returns.
//
// It is not the network plumbing: the sandbox side (a unix socket bound
// into the sandbox, a forwarder on 127.0.0.1 inside, HTTP_PROXY and
// HTTPS_PROXY) belongs to the sandbox backend, and recording attempts into
// a run to the runtime. It inspects no TLS: a CONNECT is allowed or denied
// by its destination alone.
package egress
