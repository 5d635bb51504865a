package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
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
	asked := map[string]uint64{pool.LimitCPU: b.CPUMillis, pool.LimitMemory: b.MemoryBytes, pool.LimitPids: b.Pids, pool.LimitOpenFiles: b.OpenFiles, pool.LimitWorkspace: b.WorkspaceBytes}
	var refused, above []string
	for _, name := range b.Set() {
		if slices.Contains(enforced, name) {
			if m := e.Max[name]; m > 0 && asked[name] > m {
				above = append(above, fmt.Sprintf("%s %d is above the %d this host can apply (%s)", name, asked[name], m, e.How[name]))
			}
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
	if e != nil && e.WorkspaceInMemory && slices.Contains(enforced, pool.LimitMemory) && slices.Contains(enforced, pool.LimitWorkspace) {
		if m := sandbox.MaxWorkspace(b.MemoryBytes); m > 0 && b.WorkspaceBytes > m {
			above = append(above, fmt.Sprintf("workspace %s is over half of memory %s (the workspace is a tmpfs whose pages count against the memory limit, as /tmp's and /dev/shm's do, each an eighth of it: the runner and the workload keep a quarter)", p.Spec.Limits.Workspace, p.Spec.Limits.Memory))
		}
	}
	if len(above) > 0 {
		return sandbox.Limits{}, fmt.Errorf("%w: pool %s (%s): spec.limits sets %s", ErrUnenforceable, p.Metadata.Name, pool.PoolFile(p.Metadata.Name), strings.Join(above, "; "))
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

// boundsOf is poolBounds for pool as the runtime's current desired state
// has it.
func (r *Runtime) boundsOf(poolName string) (bounds, error) {
	d, _ := r.desired()
	if d == nil || d.Pools[poolName] == nil {
		return bounds{}, fmt.Errorf("%w: %q", ErrNoPool, poolName)
	}
	return poolBounds(d.Pools[poolName].Pool, r.warm.enforcement)
}

// manifestLimits is the run manifest's record of the limits sandbox s of
// pool has, read back from the kernel by the backend (sandbox.Bounded's
// Applied), never copied from the pool's settings: a limit the pool sets
// that the kernel does not hold as asked says so. nil when the pool sets
// none.
func (r *Runtime) manifestLimits(ctx context.Context, d *Desired, poolName string, s *sandbox.Sandbox) *runmanifest.Limits {
	p := d.Pools[poolName]
	if p == nil {
		return nil
	}
	b, err := p.Pool.Spec.Limits.Bounds()
	if err != nil || len(b.Set()) == 0 {
		return nil
	}
	lim, err := poolLimits(p.Pool, r.warm.enforcement)
	if err != nil {
		return nil
	}
	cg := "none"
	if e := r.warm.enforcement; e != nil {
		cg = e.Cgroup
	}
	applied, aerr := sandbox.Applied{}, error(nil)
	if bb, ok := r.warm.backend.(sandbox.Bounded); ok {
		applied, aerr = bb.Applied(ctx, s.ID)
	} else {
		aerr = errors.New("the backend reads back no limits")
	}
	out := &runmanifest.Limits{Cgroup: cg, Enforced: map[string]string{}, Applied: map[string]uint64{}}
	maps.Copy(out.Applied, applied.Values)
	want := map[string]uint64{pool.LimitCPU: lim.CPUMillis, pool.LimitMemory: lim.MemoryBytes, pool.LimitPids: lim.Pids, pool.LimitOpenFiles: lim.NoFile, pool.LimitWorkspace: lim.WorkspaceBytes}
	for _, name := range b.Set() {
		w, got := want[name], applied.Values[name]
		switch {
		case w == 0:
			out.Enforced[name] = "not enforced (accepted by spec.acceptUnenforced)"
		case got == 0 && aerr != nil:
			out.Enforced[name] = fmt.Sprintf("not enforced: %d asked, and it could not be read back (%v)", w, aerr)
		case got == 0:
			out.Enforced[name] = fmt.Sprintf("not enforced: %d asked, and the kernel holds no such limit for this sandbox", w)
		case !sameLimit(name, w, got):
			out.Enforced[name] = fmt.Sprintf("not enforced as asked: %d asked, the kernel holds %d (%s)", w, got, applied.How[name])
		default:
			out.Enforced[name] = fmt.Sprintf("enforced: %d, read back from %s", got, applied.How[name])
		}
	}
	return out
}

// sameLimit says whether the kernel's value got is the limit w asked
// for: sizes within a page (the kernel keeps whole pages).
func sameLimit(name string, w, got uint64) bool {
	switch name {
	case pool.LimitMemory, pool.LimitWorkspace:
		return max(w, got)-min(w, got) < 4096
	}
	return w == got
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
