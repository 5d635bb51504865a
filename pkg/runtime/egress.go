package runtime

import (
	"context"
	"maps"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/slipway-dev/slipway/pkg/egress"
	"github.com/slipway-dev/slipway/pkg/runs"
)

// egressLog holds the egress attempts of sandboxes until the runs holding
// them record them, and counts denials by policy revision.
type egressLog struct {
	mu      sync.Mutex
	pending map[string][]runs.EgressAttempt // by sandbox id
	dropped map[string]int                  // by sandbox id: beyond runs.MaxEgress
	denials map[string]float64              // by policy revision
}

// RecordEgress is the sandbox backend's egress recorder
// (local.WithEgressRecorder): it keeps the attempt of sandbox id until
// the run holding that sandbox records it in its manifest (after each
// command, and when the claim moves or ends). It does not block on I/O.
func (r *Runtime) RecordEgress(sandboxID string, a egress.Attempt) {
	l := &r.egress
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == nil {
		l.pending, l.dropped = map[string][]runs.EgressAttempt{}, map[string]int{}
	}
	if len(l.pending[sandboxID]) >= runs.MaxEgress {
		l.dropped[sandboxID]++
		return
	}
	l.pending[sandboxID] = append(l.pending[sandboxID], runs.EgressAttempt{
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
func (r *Runtime) takeEgress(sandboxID string) ([]runs.EgressAttempt, int) {
	r.egress.mu.Lock()
	defer r.egress.mu.Unlock()
	as, n := r.egress.pending[sandboxID], r.egress.dropped[sandboxID]
	delete(r.egress.pending, sandboxID)
	delete(r.egress.dropped, sandboxID)
	return as, n
}

// addEgress records sandbox id's pending attempts in m (inside a store
// Update) and returns how many were denied.
func addEgress(m *runs.Manifest, as []runs.EgressAttempt, dropped int) int {
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
	if err := r.store.Update(ctx, runID, func(m *runs.Manifest) error {
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

// denialCollector exposes PolicyDenials as the counter
// slipway_policy_denial_count{policy_revision}.
type denialCollector struct {
	rt   *Runtime
	desc *prometheus.Desc
}

func newDenialCollector(rt *Runtime) *denialCollector {
	return &denialCollector{rt: rt, desc: prometheus.NewDesc("slipway_policy_denial_count",
		"Egress attempts the allow-list denied, by the policy revision of the run that made them.", []string{"policy_revision"}, nil)}
}

func (c *denialCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *denialCollector) Collect(ch chan<- prometheus.Metric) {
	for rev, n := range c.rt.PolicyDenials() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, n, rev)
	}
}
