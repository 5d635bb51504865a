package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// ErrUnenforceable marks a pool whose pool.yaml sets a limit this
// runtime's backend cannot enforce and does not list it under
// acceptUnenforced: the runtime refuses to warm or grant it.
var ErrUnenforceable = errors.New("runtime: pool limit cannot be enforced here")

// enforcement is what the backend enforces; nil when it says nothing (a
// backend that is not sandbox.Bounded enforces none of pool.yaml's
// limits itself).
func enforcement(b sandbox.Backend) *sandbox.Enforcement {
	if bb, ok := b.(sandbox.Bounded); ok {
		e := bb.Enforcement()
		return &e
	}
	return nil
}

// poolLimits turns p's spec.limits into the limits the backend is asked
// to enforce. A limit the backend cannot enforce is left out when the
// pool accepts that (spec.acceptUnenforced) and refused otherwise, with an
// error naming the pool file, the limit and why.
func poolLimits(p *pool.Pool, e *sandbox.Enforcement) (sandbox.Limits, error) {
	b, err := p.Spec.Limits.Bounds()
	if err != nil { // ParsePool checked it; a hand-made Pool may not be
		return sandbox.Limits{}, fmt.Errorf("%s: %w", pool.PoolFile(p.Metadata.Name), err)
	}
	var enforced []string
	cg, why := "none", "the backend enforces no pool limits"
	if e != nil {
		enforced, cg, why = e.Enforced, e.Cgroup, e.Unavailable
	}
	l := sandbox.Limits{NoFile: b.OpenFiles, CPUMillis: b.CPUMillis, MemoryBytes: b.MemoryBytes, Pids: b.Pids, WorkspaceBytes: b.WorkspaceBytes}
	var refused []string
	for _, name := range b.Set() {
		if slices.Contains(enforced, name) {
			continue
		}
		if !slices.Contains(p.Spec.AcceptUnenforced, name) {
			refused = append(refused, name)
			continue
		}
		switch name { // accepted: run without it
		case pool.LimitCPU:
			l.CPUMillis = 0
		case pool.LimitMemory:
			l.MemoryBytes = 0
		case pool.LimitPids:
			l.Pids = 0
		case pool.LimitOpenFiles:
			l.NoFile = 0
		case pool.LimitWorkspace:
			l.WorkspaceBytes = 0
		}
	}
	if len(refused) > 0 {
		return sandbox.Limits{}, fmt.Errorf("%w: %s: spec.limits sets %s, which this host cannot enforce (cgroup %s; %s), and spec.acceptUnenforced does not accept it",
			ErrUnenforceable, pool.PoolFile(p.Metadata.Name), strings.Join(refused, ", "), cg, why)
	}
	return l, nil
}

// bounds is what a pool's sandboxes are made within: its limits as
// poolLimits has them, its network, and shape, the hash of everything of
// the pool's settings that shapes a sandbox (sandbox.Spec.Shape).
type bounds struct {
	limits  sandbox.Limits
	network sandbox.Network
	allow   []string
	shape   string
}

// shapeOf hashes what shapes a sandbox of a pool: the limits it is made
// with, its network and allow list, and its Kubernetes settings (node
// image label, runtime class and whatever else is added there). A change
// of any of them is a new shape, and warm members of the old one are
// replaced, never edited (DESIGN: "a settings change replaces members").
func shapeOf(l sandbox.Limits, network sandbox.Network, allow []string, k *pool.Kubernetes) string {
	data, _ := json.Marshal(struct {
		Limits     sandbox.Limits   `json:"limits"`
		Network    sandbox.Network  `json:"network"`
		Allow      []string         `json:"allow"`
		Kubernetes *pool.Kubernetes `json:"kubernetes"`
	}{l, network, allow, k})
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:12])
}

// poolBounds is poolLimits with p's spec.network.
func poolBounds(p *pool.Pool, e *sandbox.Enforcement) (bounds, error) {
	l, err := poolLimits(p, e)
	if err != nil {
		return bounds{}, err
	}
	b := bounds{limits: l, network: sandbox.NetworkDeny}
	if p.Spec.Network.Mode == string(sandbox.NetworkAllowList) {
		b.network, b.allow = sandbox.NetworkAllowList, p.Spec.Network.Allow
	}
	b.shape = shapeOf(b.limits, b.network, b.allow, p.Spec.Kubernetes)
	return b, nil
}

// fits reports whether s, a warm member, was made for the pool's settings
// as b has them: the same shape. A member that records no shape (made
// before shapes were recorded) fits nothing: it may have been made for
// any settings, so it is replaced.
func (b bounds) fits(s *sandbox.Sandbox) bool {
	return s.Shape != "" && s.Shape == b.shape
}

// limitsReport is a run manifest's record of its sandbox's limits.
func limitsReport(p *pool.Pool, e *sandbox.Enforcement, l sandbox.Limits) map[string]string {
	b, err := p.Spec.Limits.Bounds()
	if err != nil {
		return nil
	}
	out := map[string]string{}
	set := map[string]uint64{pool.LimitCPU: l.CPUMillis, pool.LimitMemory: l.MemoryBytes, pool.LimitPids: l.Pids, pool.LimitOpenFiles: l.NoFile, pool.LimitWorkspace: l.WorkspaceBytes}
	for _, name := range b.Set() {
		if set[name] == 0 {
			out[name] = "not enforced (accepted by spec.acceptUnenforced)"
			continue
		}
		how := "enforced"
		if e != nil && e.How[name] != "" {
			how = e.How[name]
		}
		out[name] = how
	}
	return out
}

// boundsOf is poolBounds for pool as the runtime's current desired state
// has it.
func (r *Runtime) boundsOf(poolName string) (bounds, error) {
	d, _ := r.desired()
	if d == nil || d.Pools[poolName] == nil {
		return bounds{}, fmt.Errorf("%w: %q", ErrNoPool, poolName)
	}
	return poolBounds(d.Pools[poolName].Pool, r.warm.enforcement)
}

// manifestLimits is the run manifest's record of the limits pool's
// sandboxes get here; nil when the pool sets none.
func (r *Runtime) manifestLimits(d *Desired, poolName string) *runmanifest.Limits {
	p := d.Pools[poolName]
	if p == nil {
		return nil
	}
	lim, err := poolLimits(p.Pool, r.warm.enforcement)
	if err != nil {
		return nil
	}
	enforced := limitsReport(p.Pool, r.warm.enforcement, lim)
	if len(enforced) == 0 {
		return nil
	}
	cg := "none"
	if e := r.warm.enforcement; e != nil {
		cg = e.Cgroup
	}
	return &runmanifest.Limits{Cgroup: cg, Enforced: enforced}
}

// execBounded runs req in s and, where the backend counts what its limits
// did, names the limit that ended the command (ExitStatus.Outcome) and
// records the run's first such outcome in its manifest.
func (r *Runtime) execBounded(ctx context.Context, runID string, s *sandbox.Sandbox, req runner.ExecRequest, stdout, stderr io.Writer) (*runner.ExitStatus, error) {
	bb, ok := r.warm.backend.(sandbox.Bounded)
	if !ok {
		return s.Exec(ctx, req, stdout, stderr)
	}
	before, berr := bb.LimitEvents(ctx, s.ID)
	st, err := s.Exec(ctx, req, stdout, stderr)
	if err != nil || berr != nil {
		return st, err
	}
	after, aerr := bb.LimitEvents(context.WithoutCancel(ctx), s.ID)
	if aerr != nil {
		return st, nil
	}
	if st.Outcome = sandbox.Outcome(before, after, st); st.Outcome != "" {
		_ = r.store.Update(context.WithoutCancel(ctx), runID, func(m *runmanifest.Manifest) error {
			if m.Outcome == "" {
				m.Outcome = st.Outcome
			}
			return nil
		})
	}
	return st, nil
}
