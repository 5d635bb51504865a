package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// ErrProofRefused: a proof request names a generation the pool does not
// warm (or that did not verify), or checks that do not exist (HTTP 409 or
// 400).
var ErrProofRefused = errors.New("runtime: proof refused")

// Leftovers is what a backend can say about a deleted sandbox: anything of
// it still on the machine (processes, folders). The cleanup proof uses it
// where the backend has it.
type Leftovers interface {
	Leftovers(ctx context.Context, id string) ([]string, error)
}

// proofTimeout bounds each command a proof runs in the sandbox.
const proofTimeout = 30 * time.Second

// Prove runs a rollout's proof checks on a proof claim: a ready warm member
// of the generation (warming or active in the desired state), never a
// cold start, never counted as traffic and with no run manifest. Each
// check in req.Checks gives one piece of evidence, in order; a check that
// cannot run because an earlier one failed says so. The proof claim's
// sandbox is deleted at the end (the cleanup check proves it is gone).
func (r *Runtime) Prove(ctx context.Context, poolName string, req runtimeapi.ProofRequest) (*runtimeapi.ProofResult, error) {
	if r.Draining() {
		return nil, ErrDraining
	}
	d, at := r.desired()
	if err := r.stale(d, at); err != nil {
		return nil, err
	}
	p, ok := d.Pools[poolName]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoPool, poolName)
	}
	if req.Rollout == "" || len(req.Checks) == 0 {
		return nil, fmt.Errorf("%w: a proof names its rollout and at least one check", ErrProofRefused)
	}
	for _, c := range req.Checks {
		if !slices.Contains(pool.Proofs, c) {
			return nil, fmt.Errorf("%w: unknown check %q (want %s)", ErrProofRefused, c, strings.Join(pool.Proofs, ", "))
		}
	}
	var state string
	for _, e := range p.State.Generations {
		if e.ID == req.Generation {
			state = e.State
		}
	}
	if state != pool.Warming && state != pool.Active {
		return nil, fmt.Errorf("%w: %s is not a warming or active generation of pool %s at %s", ErrProofRefused, req.Generation, poolName, short(d.Revision))
	}
	g, ok := p.Generations[req.Generation]
	if !ok {
		return nil, fmt.Errorf("%w: %s did not verify: %s", ErrProofRefused, req.Generation, p.Refused[req.Generation])
	}
	pr := &prover{r: r, pool: p, g: g, by: "runtime on " + r.node, res: &runtimeapi.ProofResult{Pool: poolName, Generation: g.ID, Rollout: req.Rollout, Evidence: []runtimeapi.Evidence{}}}
	// The proof claim is held (Holds) until its sandbox is released: it has
	// no run manifest for a cleanup reconciler to read.
	owner := "proof-" + req.Rollout + "-" + newToken()[:8]
	r.mu.Lock()
	r.proofs[owner] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.proofs, owner)
		r.mu.Unlock()
	}()
	defer pr.release(context.WithoutCancel(ctx))

	start := r.now()
	lim, lerr := poolBounds(p.Pool, r.warm.enforcement)
	if lerr != nil {
		return nil, fmt.Errorf("%w: %w", ErrProofRefused, lerr)
	}
	s, err := r.warm.claimMember(ctx, poolName, g, owner, lim)
	if err != nil {
		pr.add("allocate", start, false, "no warm member of %s could be claimed: %v", g.ID, err)
	} else {
		pr.s, pr.res.SandboxID = s, s.ID
		pr.add("allocate", start, true, "warm member %s of %s claimed in %s", s.ID, g.ID, r.now().Sub(start).Round(time.Microsecond))
	}
	for _, c := range req.Checks {
		if c == "allocate" {
			continue
		}
		start := r.now()
		if pr.s == nil {
			pr.add(c, start, false, "not run: no sandbox was allocated")
			continue
		}
		switch c {
		case "identity":
			pr.identity(ctx, start)
		case "network":
			pr.network(ctx, start)
		case "template-tests":
			pr.templateTests(ctx, start)
		case "workspace-writable":
			pr.workspace(ctx, start)
		case "cleanup":
			pr.cleanup(ctx, start)
		}
	}
	// Evidence in the order asked, allocate where the request put it.
	order := func(e runtimeapi.Evidence) int { return slices.Index(req.Checks, e.Check) }
	slices.SortStableFunc(pr.res.Evidence, func(a, b runtimeapi.Evidence) int { return order(a) - order(b) })
	if !slices.Contains(req.Checks, "allocate") {
		pr.res.Evidence = slices.DeleteFunc(pr.res.Evidence, func(e runtimeapi.Evidence) bool { return e.Check == "allocate" && e.Passed })
	}
	return pr.res, nil
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// prover runs the checks of one proof claim.
type prover struct {
	r        *Runtime
	pool     *PoolDesired
	g        *generation.Generation
	by       string
	s        *sandbox.Sandbox
	released bool
	res      *runtimeapi.ProofResult
}

func (p *prover) add(check string, start time.Time, passed bool, format string, args ...any) {
	p.res.Evidence = append(p.res.Evidence, runtimeapi.Evidence{Check: check, Passed: passed, Reason: fmt.Sprintf(format, args...),
		Generation: p.g.ID, SandboxID: p.res.SandboxID, Started: start.UTC(), Finished: p.r.now().UTC(), By: p.by})
}

func (p *prover) release(ctx context.Context) {
	if p.s != nil && !p.released {
		p.released = true
		_ = p.r.warm.Release(ctx, p.s.ID)
		p.r.takeEgress(p.s.ID) // a proof's attempts are its evidence, not a run's
	}
}

// exec runs argv in the sandbox with the proof timeout; out is stdout and
// stderr together.
func (p *prover) exec(ctx context.Context, argv ...string) (*runner.ExitStatus, string, error) {
	return p.execFor(ctx, proofTimeout, argv...)
}

func (p *prover) execFor(ctx context.Context, timeout time.Duration, argv ...string) (*runner.ExitStatus, string, error) {
	var out bytes.Buffer
	st, err := p.s.Exec(ctx, runner.ExecRequest{Argv: argv, TimeoutMs: timeout.Milliseconds(), MaxOutput: 64 << 10}, &out, &out)
	return st, strings.TrimSpace(out.String()), err
}

// identity: the runner answers with the generation and sandbox it was
// started for, and its executable hashes to the digest the pinned runner
// image records.
func (p *prover) identity(ctx context.Context, start time.Time) {
	id, err := p.s.Identity(ctx)
	if err != nil {
		p.add("identity", start, false, "the runner did not answer: %v", err)
		return
	}
	rb, err := p.r.warm.art.Runner(ctx, p.g)
	if err != nil {
		p.add("identity", start, false, "the pinned runner image could not be read: %v", err)
		return
	}
	var why []string
	if id.Generation != p.g.ID {
		why = append(why, fmt.Sprintf("generation %q, want %s", id.Generation, p.g.ID))
	}
	if id.SandboxID != p.s.ID {
		why = append(why, fmt.Sprintf("sandbox %q, want %s", id.SandboxID, p.s.ID))
	}
	if id.RunnerBinarySHA256 != rb.Digest {
		why = append(why, fmt.Sprintf("its binary's sha256 is %s, the pinned runner image %s records %s",
			id.RunnerBinarySHA256, p.g.Pins[generation.Runner].Identity(), rb.Digest))
	}
	if len(why) > 0 {
		p.add("identity", start, false, "the runner is not the one pinned: %s", strings.Join(why, "; "))
		return
	}
	p.add("identity", start, true, "runner binary %s (runner image %s) for %s in %s (protocol %d..%d)",
		id.RunnerBinarySHA256, p.g.Pins[generation.Runner].Identity(), id.Generation, id.SandboxID, id.MinProtocolVersion, id.ProtocolVersion)
}

// network: the sandbox reaches nothing by itself (deny and allow-list
// pools alike; for allow-list, throughProxy checks its proxy too): a
// listener on every address of this host, IPv4 and IPv6, gets no
// connection from it. The targets are 127.0.0.1, [::1] and each
// non-loopback address of the host (IPv6 link-local ones need a zone, and
// are left out); each is first dialled from the host itself, so a target
// that proves nothing (the host cannot reach it either) is skipped, and the
// evidence says so with the reason, as it does when the host has no IPv6
// at all or no non-loopback IPv6 address.
func (p *prover) network(ctx context.Context, start time.Time) {
	if nw := p.pool.Pool.Spec.Network; nw.Mode == "allow-list" && p.r.warm.cluster != nil {
		// A cluster's sandboxes go out by its network policy, not an
		// egress proxy of the runtime's.
		p.add("network", start, true, "pool %s allows %s: the cluster's network policy enforces it (not probed)", p.pool.Pool.Metadata.Name, strings.Join(nw.Allow, ", "))
		return
	}
	ok, msg := p.noRoute(ctx)
	if nw := p.pool.Pool.Spec.Network; ok && nw.Mode == "allow-list" {
		var more string
		ok, more = p.throughProxy(ctx, nw.Allow)
		msg += "; " + more
	}
	p.add("network", start, ok, "%s", msg)
}

// noRoute checks that the sandbox reaches no address of this host by
// itself (an allow-list pool's sandbox too: only its proxy goes out).
func (p *prover) noRoute(ctx context.Context) (bool, string) {
	accepted := make(chan string, 64)
	accept := func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case accepted <- c.RemoteAddr().String():
			default:
			}
			c.Close()
		}
	}
	ln4, err := net.Listen("tcp4", ":0")
	if err != nil {
		return false, fmt.Sprintf("no IPv4 listener to probe with: %v", err)
	}
	defer ln4.Close()
	go accept(ln4)
	var skipped []string
	ln6, err6 := net.Listen("tcp6", ":0") // IPv6 only: tcp6 sets IPV6_V6ONLY
	if err6 != nil {
		skipped = append(skipped, fmt.Sprintf("IPv6: this host has no IPv6 listener (%v)", err6))
	} else {
		defer ln6.Close()
		go accept(ln6)
	}
	port4 := fmt.Sprint(ln4.Addr().(*net.TCPAddr).Port)
	candidates := []string{net.JoinHostPort("127.0.0.1", port4)}
	var port6 string
	if err6 == nil {
		port6 = fmt.Sprint(ln6.Addr().(*net.TCPAddr).Port)
		candidates = append(candidates, net.JoinHostPort("::1", port6))
	}
	nonLoop6 := 0
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			switch {
			case !ok || ipn.IP.IsLoopback():
			case ipn.IP.To4() != nil:
				candidates = append(candidates, net.JoinHostPort(ipn.IP.String(), port4))
			case err6 == nil && !ipn.IP.IsLinkLocalUnicast() && !ipn.IP.IsMulticast():
				candidates = append(candidates, net.JoinHostPort(ipn.IP.String(), port6))
				nonLoop6++
			}
		}
	} else {
		skipped = append(skipped, fmt.Sprintf("non-loopback addresses: cannot list this host's addresses (%v)", err))
	}
	if err6 == nil && nonLoop6 == 0 {
		skipped = append(skipped, "IPv6 non-loopback: this host has no IPv6 address other than loopback and link-local ones")
	}
	// Each target must take a connection from the host itself (a control),
	// or the sandbox failing to reach it proves nothing.
	controls := map[string]bool{}
	var targets []string
	for _, t := range candidates {
		c, err := net.DialTimeout("tcp", t, 3*time.Second)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: not reachable from the host itself (%v)", t, err))
			continue
		}
		controls[c.LocalAddr().String()] = true
		c.Close()
		targets = append(targets, t)
	}
	if len(targets) == 0 {
		return false, fmt.Sprintf("no address of this host takes a connection from the host itself: %s", strings.Join(skipped, "; "))
	}
	var reached []string
	for _, t := range targets {
		st, out, err := p.exec(ctx, p.s.RunnerBinaryPath(), "probe", "dial", t)
		switch {
		case err != nil:
			return false, fmt.Sprintf("the probe did not run: %v", err)
		case st.ExitCode == 0:
			reached = append(reached, t)
		case st.ExitCode != 3:
			return false, fmt.Sprintf("the probe of %s failed to run (exit %d): %s", t, st.ExitCode, out)
		}
	}
	for more := true; more; {
		select {
		case from := <-accepted:
			if !controls[from] {
				reached = append(reached, "a connection arrived from "+from)
			}
		default:
			more = false
		}
	}
	if len(reached) > 0 {
		return false, fmt.Sprintf("the sandbox has network where pool %s denies it: %s", p.pool.Pool.Metadata.Name, strings.Join(reached, "; "))
	}
	var v4, v6 []string
	for _, t := range targets {
		if strings.HasPrefix(t, "[") {
			v6 = append(v6, t)
		} else {
			v4 = append(v4, t)
		}
	}
	msg := fmt.Sprintf("no connection to this host's IPv4 %s or IPv6 %s from inside the sandbox (pool network: %s)",
		orNone(v4), orNone(v6), p.pool.Pool.Spec.Network.Mode)
	if len(skipped) > 0 {
		msg += "; skipped: " + strings.Join(skipped, "; ")
	}
	return true, msg
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

// templateTests runs the tests the template image records (label
// dev.slipway.template.tests) in the sandbox; each must exit 0.
func (p *prover) templateTests(ctx context.Context, start time.Time) {
	img, _, err := p.r.warm.art.Template(ctx, p.g)
	if err != nil {
		p.add("template-tests", start, false, "the pinned template could not be read: %v", err)
		return
	}
	cf, err := img.ConfigFile()
	if err != nil {
		p.add("template-tests", start, false, "the template's config: %v", err)
		return
	}
	raw := cf.Config.Labels[templatemeta.LabelTests]
	if raw == "" {
		p.add("template-tests", start, true, "the template records no tests (label %s)", templatemeta.LabelTests)
		return
	}
	tests, err := templatemeta.ParseTests(raw)
	if err != nil {
		p.add("template-tests", start, false, "label %s does not parse: %v", templatemeta.LabelTests, err)
		return
	}
	var names []string
	for _, t := range tests {
		timeout := proofTimeout
		if t.Timeout.Duration > 0 {
			timeout = t.Timeout.Duration
		}
		st, out, err := p.execFor(ctx, timeout, t.Run...)
		if err != nil {
			p.add("template-tests", start, false, "test %s did not run: %v", t.Name, err)
			return
		}
		if st.ExitCode != 0 {
			if len(out) > 300 {
				out = out[len(out)-300:]
			}
			p.add("template-tests", start, false, "test %s exited %d: %s", t.Name, st.ExitCode, out)
			return
		}
		names = append(names, t.Name)
	}
	p.add("template-tests", start, true, "%d tests passed in the sandbox: %s", len(names), strings.Join(names, ", "))
}

// workspace: a file can be written in the workspace, read back and
// removed.
func (p *prover) workspace(ctx context.Context, start time.Time) {
	dir := p.s.Workdir
	if dir == "" {
		dir = "."
	}
	st, out, err := p.exec(ctx, p.s.RunnerBinaryPath(), "probe", "write", dir)
	switch {
	case err != nil:
		p.add("workspace-writable", start, false, "the probe did not run: %v", err)
	case st.ExitCode != 0:
		p.add("workspace-writable", start, false, "the workspace %s is not writable (exit %d): %s", dir, st.ExitCode, out)
	default:
		p.add("workspace-writable", start, true, "%s", out)
	}
}

// cleanup: releasing the proof claim deletes its sandbox: the backend
// lists it no more, and nothing of it is left on the machine.
func (p *prover) cleanup(ctx context.Context, start time.Time) {
	id := p.s.ID
	p.released = true
	if err := p.r.warm.Release(ctx, id); err != nil {
		p.add("cleanup", start, false, "release of %s failed: %v", id, err)
		return
	}
	all, err := p.r.warm.backend.List(ctx, sandbox.Filter{Pool: p.s.Pool})
	if err != nil {
		p.add("cleanup", start, false, "the backend could not list: %v", err)
		return
	}
	if slices.ContainsFunc(all, func(s *sandbox.Sandbox) bool { return s.ID == id }) {
		p.add("cleanup", start, false, "%s is still listed after its release", id)
		return
	}
	if lo, ok := p.r.warm.backend.(Leftovers); ok {
		left, err := lo.Leftovers(ctx, id)
		if err != nil {
			p.add("cleanup", start, false, "could not look for what is left of %s: %v", id, err)
			return
		}
		if len(left) > 0 {
			p.add("cleanup", start, false, "left of %s after release: %s", id, strings.Join(left, ", "))
			return
		}
		p.add("cleanup", start, true, "%s released: no process, folder or record of it left", id)
		return
	}
	p.add("cleanup", start, true, "%s released: the backend lists it no more", id)
}

// claimMember takes a ready warm member of generation g (never creating
// one): proofs run on what claims would get.
//
// On a cluster that keeps the warm pools it is a claim marked as a proof
// on g's warm pool, refused (and released) when the cluster cold-started
// it instead of handing it a ready warm member.
func (w *Warm) claimMember(ctx context.Context, poolName string, g *generation.Generation, claimID string, lim bounds) (*sandbox.Sandbox, error) {
	if w.cluster != nil {
		s, err := w.create(ctx, poolName, g, claimID, true, lim)
		if err != nil {
			return nil, err
		}
		if !launchedWarm(s) {
			_ = w.Release(context.WithoutCancel(ctx), s.ID)
			return nil, fmt.Errorf("no ready warm member of %s in pool %s: the proof claim was not handed a warm member", g.ID, poolName)
		}
		return s, nil
	}
	s, err := w.take(ctx, poolName, g, claimID, true, lim)
	if err == nil && s == nil {
		err = fmt.Errorf("no ready warm member of %s in pool %s", g.ID, poolName)
	}
	return s, err
}
