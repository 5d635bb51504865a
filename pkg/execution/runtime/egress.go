package runtime

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"strings"
	"sync"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/egress"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// egressLog holds the egress attempts of sandboxes until the runs holding
// them record them, and counts denials by policy revision.
type egressLog struct {
	mu      sync.Mutex
	pending map[string][]runmanifest.EgressAttempt // by sandbox id
	dropped map[string]int                         // by sandbox id: beyond runmanifest.MaxEgress
	denials map[string]float64                     // by policy revision
	revs    []string                               // denials' keys, oldest first
}

// DenialRevisions bounds the policy_revision label of policy_denial_count:
// the denials of the newest this many revisions that denied anything are
// exported; an older revision's series ends (its count stays in the run
// manifests, where slipway runs show --egress reads it).
const DenialRevisions = 3

// RecordEgress is the sandbox backend's egress recorder
// (local.WithEgressRecorder): it keeps the attempt of sandbox id until
// the run holding that sandbox records it in its manifest (after each
// command, and when the claim moves or ends). It does not block on I/O.
func (r *Runtime) RecordEgress(sandboxID string, a egress.Attempt) {
	l := &r.egress
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == nil {
		l.pending, l.dropped = map[string][]runmanifest.EgressAttempt{}, map[string]int{}
	}
	if len(l.pending[sandboxID]) >= runmanifest.MaxEgress {
		l.dropped[sandboxID]++
		return
	}
	l.pending[sandboxID] = append(l.pending[sandboxID], runmanifest.EgressAttempt{
		Time: a.Time, Method: a.Method, Destination: clipField(a.Destination), Address: a.Address, Allowed: a.Allowed,
		Rule: clipField(a.Rule), Reason: clipField(a.Reason), BytesOut: a.BytesOut, BytesIn: a.BytesIn,
	})
}

// clipField keeps a recorded string within a manifest's field bound.
func clipField(s string) string {
	const max = 500
	if len(s) > max {
		return s[:max]
	}
	return s
}

// takeEgress removes and returns sandbox id's pending attempts.
func (r *Runtime) takeEgress(sandboxID string) ([]runmanifest.EgressAttempt, int) {
	r.egress.mu.Lock()
	defer r.egress.mu.Unlock()
	as, n := r.egress.pending[sandboxID], r.egress.dropped[sandboxID]
	delete(r.egress.pending, sandboxID)
	delete(r.egress.dropped, sandboxID)
	return as, n
}

// addEgress records sandbox id's pending attempts in m (inside a store
// Update) and returns how many were denied.
func addEgress(m *runmanifest.Manifest, as []runmanifest.EgressAttempt, dropped int) int {
	m.AddEgress(as...)
	m.EgressDropped += dropped
	denied := 0
	for _, a := range as {
		if !a.Allowed {
			denied++
		}
	}
	return denied
}

// countDenials adds n denials under the policy revision rev.
func (r *Runtime) countDenials(rev string, n int) {
	if n == 0 {
		return
	}
	r.egress.mu.Lock()
	defer r.egress.mu.Unlock()
	if r.egress.denials == nil {
		r.egress.denials = map[string]float64{}
	}
	if _, ok := r.egress.denials[rev]; !ok {
		r.egress.revs = append(r.egress.revs, rev)
		if len(r.egress.revs) > DenialRevisions {
			delete(r.egress.denials, r.egress.revs[0])
			r.egress.revs = r.egress.revs[1:]
		}
	}
	r.egress.denials[rev] += float64(n)
}

// flushEgress records sandbox id's pending attempts in run runID's
// manifest.
func (r *Runtime) flushEgress(ctx context.Context, runID, sandboxID string) {
	as, dropped := r.takeEgress(sandboxID)
	if len(as) == 0 && dropped == 0 {
		return
	}
	var denied int
	var rev string
	if err := r.store.Update(ctx, runID, func(m *runmanifest.Manifest) error {
		denied, rev = addEgress(m, as, dropped), m.PolicyRevision
		return nil
	}); err != nil {
		r.logf("runtime: run %s: %d egress attempts of sandbox %s not recorded: %v", runID, len(as), sandboxID, err)
		return
	}
	r.countDenials(rev, denied)
}

// PolicyDenials returns the egress attempts denied so far, by the policy
// revision of the run whose sandbox made them.
func (r *Runtime) PolicyDenials() map[string]float64 {
	r.egress.mu.Lock()
	defer r.egress.mu.Unlock()
	return maps.Clone(r.egress.denials)
}

// throughProxy is an allow-list pool's half of the network proof: through
// the sandbox's egress proxy, the concrete destinations of allow (host:port
// and IP:port entries; at most three) are reached, and a denied one (a
// listener of this host's that allow does not list, and the cloud
// metadata address) is refused, with no connection arriving.
func (p *prover) throughProxy(ctx context.Context, allow []string) (bool, string) {
	var ip string
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
				ip = n.IP.String()
				break
			}
		}
	}
	denied := []string{"169.254.169.254:80"}
	arrived := make(chan struct{}, 1)
	if ip != "" {
		ln, err := net.Listen("tcp4", net.JoinHostPort(ip, "0"))
		if err != nil {
			return false, fmt.Sprintf("no listener to probe the proxy with: %v", err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
				select {
				case arrived <- struct{}{}:
				default:
				}
			}
		}()
		if pol, err := egress.Parse(allow); err == nil && !pol.Check(ip, uint16(ln.Addr().(*net.TCPAddr).Port), netip.MustParseAddr(ip)).Allowed {
			denied = append(denied, ln.Addr().String())
		}
	}
	probe := func(dest string) (bool, string, error) {
		st, out, err := p.exec(ctx, p.s.RunnerBinaryPath(), "probe", "connect", sandbox.EgressProxyAddr, dest)
		switch {
		case err != nil:
			return false, "", fmt.Errorf("the proxy probe did not run: %w", err)
		case st.ExitCode != 0 && st.ExitCode != 3:
			return false, "", fmt.Errorf("the proxy probe of %s failed to run (exit %d): %s", dest, st.ExitCode, strings.TrimSpace(out))
		}
		return st.ExitCode == 0, strings.TrimSpace(out), nil
	}
	var reached, refused []string
	for _, d := range denied {
		ok, out, err := probe(d)
		if err != nil {
			return false, err.Error()
		}
		if ok {
			return false, fmt.Sprintf("the egress proxy let the sandbox reach %s, which pool %s does not allow: %s", d, p.pool.Pool.Metadata.Name, out)
		}
		refused = append(refused, d)
	}
	select {
	case <-arrived:
		return false, "a connection from the sandbox arrived at this host's listener, which the allow-list does not list"
	default:
	}
	for _, e := range allow {
		if len(reached) == 3 {
			break
		}
		if strings.Contains(e, "/") || strings.HasPrefix(e, "*.") {
			continue // no one destination to reach
		}
		ok, out, err := probe(e)
		if err != nil {
			return false, err.Error()
		}
		if !ok {
			return false, fmt.Sprintf("the approved destination %s was not reached through the egress proxy: %s", e, out)
		}
		reached = append(reached, e)
	}
	return true, fmt.Sprintf("through the egress proxy: approved %s reached, denied %s refused", orNone(reached), strings.Join(refused, " and "))
}
