package local

import (
	"context"
	"maps"
	"os"
	"path/filepath"

	"github.com/slipway-dev/slipway/pkg/execution/egress"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/isolate"
)

// egressDir is where an allow-list sandbox finds its egress proxy's unix
// socket (the host's sandboxes/<id>/egress, bound in read-only: a socket
// on a read-only mount still takes connections). The runner forwards
// sandbox.EgressProxyAddr to it.
const (
	egressDir    = "/run/slipway/egress"
	egressSocket = "proxy.sock"
)

// WithEgressRecorder passes every attempt of an allow-list sandbox's
// egress proxy to record, with the sandbox's id, when the attempt ends (a
// tunnel when it closes). record is called from the proxy's goroutines
// and must not block: the sandbox's connection waits for it. Without it
// the attempts are enforced but not recorded. Delete returns only once
// every attempt of the sandbox was passed on.
func WithEgressRecorder(record func(sandboxID string, a egress.Attempt)) Option {
	return func(o *options) error {
		o.egressRecord = record
		return nil
	}
}

// WithEgressResolver makes allow-list sandboxes' egress proxies look the
// listed names up with r (egress.ResolverAt names one DNS server) instead
// of the host's resolver. Names no entry lists are never looked up.
func WithEgressResolver(r egress.Resolver) Option {
	return func(o *options) error {
		o.egressDNS = r
		return nil
	}
}

// egressProxy is one sandbox's running proxy.
type egressProxy struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// proxyEnv names the proxy to every program of an allow-list sandbox that
// honours the usual variables (curl, pip, git, Go, ...); loopback stays
// direct.
func proxyEnv(add map[string]string) map[string]string {
	env := maps.Clone(add)
	if env == nil {
		env = map[string]string{}
	}
	u := "http://" + sandbox.EgressProxyAddr
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		env[k] = u
	}
	env["NO_PROXY"], env["no_proxy"] = "localhost,127.0.0.1,::1", "localhost,127.0.0.1,::1"
	return env
}

// egressMount makes the directory of a sandbox's egress proxy socket
// (dir/egress) and returns the mount that brings it in.
func egressMount(dir string) (isolate.Mount, error) {
	host := filepath.Join(dir, "egress")
	if err := os.Mkdir(host, 0o711); err != nil {
		return isolate.Mount{}, err
	}
	return isolate.Mount{Source: host, Target: egressDir, ReadOnly: true}, nil
}

// startEgress starts sandbox id's egress proxy enforcing pol on a unix
// socket in host, egressMount's directory (the socket owned by user when
// the host is root and the sandbox runs as user).
func (b *Backend) startEgress(id, host string, pol *egress.Policy, user *isolate.User) error {
	sock := filepath.Join(host, egressSocket)
	ln, err := listenUnixAt(sock)
	if err != nil {
		return err
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		return err
	}
	if user != nil && os.Geteuid() == 0 {
		if err := os.Chown(sock, user.UID, user.GID); err != nil {
			ln.Close()
			return err
		}
	}
	var record func(egress.Attempt)
	if r := b.o.egressRecord; r != nil {
		record = func(a egress.Attempt) { r(id, a) }
	}
	px := &egress.Proxy{Policy: pol, Record: record, Resolver: b.o.egressDNS}
	ctx, cancel := context.WithCancel(context.Background())
	ep := &egressProxy{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(ep.done)
		_ = px.Serve(ctx, ln) // ends only when stopped: a listener error leaves the sandbox with no way out, which is safe
	}()
	b.mu.Lock()
	b.egress[id] = ep
	b.mu.Unlock()
	return nil
}

// stopEgress stops sandbox id's proxy, if it has one, and waits until
// every attempt is recorded.
func (b *Backend) stopEgress(id string) {
	b.mu.Lock()
	ep := b.egress[id]
	delete(b.egress, id)
	b.mu.Unlock()
	if ep != nil {
		ep.cancel()
		<-ep.done
	}
}
