package rollout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
)

// Errors, for errors.Is.
var (
	// ErrHeld: another driver holds the rollout's lease.
	ErrHeld = errors.New("rollout: held by another driver")
	// ErrInProgress: a rollout is already running on the pool.
	ErrInProgress = errors.New("rollout: a rollout is in progress")
	// ErrNoRollout: the pool has no rollout to abort.
	ErrNoRollout = errors.New("rollout: no rollout")
	// ErrNotInProgress: Run found no rollout in progress (none was ever
	// started, or the last one ended and no start was committed since);
	// the error says which rollout last ended, how and when.
	ErrNotInProgress = errors.New("rollout: no rollout in progress")
	// ErrRefused: the request does not fit the pool's state (an unknown
	// generation, an abort after routing, a rollback with nothing
	// retained).
	ErrRefused = errors.New("rollout: refused")
	// ErrRolledBack: the rollout ended rolled back (a proof failed, a
	// deadline passed before routing, or it was aborted).
	ErrRolledBack = errors.New("rollout: rolled back")
	// ErrFailed: the rollout stopped in a visible, resumable failure.
	ErrFailed = errors.New("rollout: failed")
	// ErrChanged: someone else changed the rollout (aborted it, or another
	// driver took it over) while this driver worked on it.
	ErrChanged = errors.New("rollout: changed under this driver")
)

// Fleet is what a rollout sees of the machines that run the pool: what
// they run per generation, proof checks on warm members, and stopping a
// generation's claims. runtimeapi.Client implements it.
type Fleet interface {
	Info(ctx context.Context) (*runtimeapi.Info, error)
	Sync(ctx context.Context) (string, error)
	PoolStatus(ctx context.Context, pool string) (*runtimeapi.PoolStatus, error)
	Prove(ctx context.Context, pool string, req runtimeapi.ProofRequest) (*runtimeapi.ProofResult, error)
	Stop(ctx context.Context, pool, generation string) (*runtimeapi.StopResult, error)
}

// Driver drives the rollouts of one pool. It is for one goroutine at a
// time (its Repo is); two drivers of the same pool, in one process or
// two, each have their own and the lease decides between them.
type Driver struct {
	// Repo is the config repository; Branch its branch (default main).
	Repo   *gitops.Repo
	Branch string
	Pool   string
	// Fleet runs the pool (needed to drive; not to start, abort or show).
	Fleet Fleet
	// Signer signs the evidence (a DSSE envelope of an in-toto statement).
	// Without one, UnsignedEvidence must say so.
	Signer           signature.SignerVerifier
	UnsignedEvidence bool
	// Author signs the commits.
	Author gitops.Signature
	// Actor names who acts through this driver (an operator's token id,
	// never a token), and Reason why it starts a rollout: when set, the
	// commit that starts or aborts a rollout carries them as the trailers
	// Slipway-Actor and Slipway-Reason (Abort's reason is its own).
	Actor, Reason string
	// Holder names this driver in the lease (default host/pid/random).
	Holder string
	// Lease is how long the lease lasts unless renewed (default 1m);
	// Poll how often the fleet is looked at (default 500ms).
	Lease, Poll time.Duration
	// Log gets one line per step (default: discard).
	Log io.Writer
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Progress, when set, hears what a step waits for while it waits on
	// the fleet: before each look and after it (for a progress display;
	// it must return quickly).
	Progress func(Wait)

	failpoint func(name string) // failpoints build only
}

func (d *Driver) defaults() {
	if d.Branch == "" {
		d.Branch = "main"
	}
	if d.Holder == "" {
		host, _ := os.Hostname()
		d.Holder = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), randomHex(4))
	}
	if d.Lease <= 0 {
		d.Lease = time.Minute
	}
	if d.Poll <= 0 {
		d.Poll = 500 * time.Millisecond
	}
	if d.Log == nil {
		d.Log = io.Discard
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.failpoint == nil {
		d.failpoint = func(string) {}
		if failpointHook != nil {
			d.failpoint = failpointHook
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (d *Driver) logf(format string, args ...any) {
	fmt.Fprintf(d.Log, format+"\n", args...)
}

// view is the pool as one commit has it.
type view struct {
	tree   *gitops.Tree
	commit string
	pool   *pool.Pool
	state  *pool.State
}

func readView(t *gitops.Tree, name string) (*view, error) {
	pl, err := pool.ReadPool(name, t.ReadFile)
	if errors.Is(err, gitops.ErrNotExist) {
		return nil, fmt.Errorf("%w: the config repository has no pool %s (%s)", ErrRefused, name, pool.PoolFile(name))
	}
	if err != nil {
		return nil, err
	}
	st, err := pool.ReadState(name, t.ReadFile)
	if err != nil {
		return nil, err
	}
	return &view{tree: t, pool: pl, state: st}, nil
}

// generationOf reads a generation document of the pool.
func (v *view) generationOf(id string) (*generation.Generation, error) {
	file := pool.GenerationFile(v.state.Pool, id)
	b, err := v.tree.ReadFile(file)
	if errors.Is(err, gitops.ErrNotExist) {
		return nil, fmt.Errorf("%w: generation %s is not in the config repository (%s): promote it first", ErrRefused, id, file)
	}
	if err != nil {
		return nil, err
	}
	g, err := generation.ParseNamed(b, file)
	if err != nil {
		return nil, err
	}
	if g.ID != id {
		return nil, fmt.Errorf("%s holds %s, not %s", file, g.ID, id)
	}
	return g, nil
}

// snapshot reads the pool at the branch's head.
func (d *Driver) snapshot(ctx context.Context) (*view, error) {
	t, head, err := d.Repo.Snapshot(ctx, d.Branch)
	if err != nil {
		return nil, err
	}
	v, err := readView(t, d.Pool)
	if err != nil {
		return nil, err
	}
	v.commit = head
	return v, nil
}

// Status is what `rollout status` shows.
type Status struct {
	Pool     string        `json:"pool"`
	Revision string        `json:"revision"`
	Phase    string        `json:"phase"`
	Status   string        `json:"status"`
	Active   string        `json:"active"`
	Target   string        `json:"target"`
	Warming  []string      `json:"warming"`
	Draining []string      `json:"draining"`
	Retained []string      `json:"retained"`
	Rollout  *pool.Rollout `json:"rollout,omitempty"`
	// DrainingRuns are the runs of the draining generation still open.
	DrainingRuns []string `json:"drainingRuns"`
	// Evidence is the rollout's proof evidence, as committed.
	Evidence []runtimeapi.Evidence `json:"evidence"`
	// Steps are the rollout's seven steps as its commits record them
	// (WithSteps; Status alone reads only the head).
	Steps []Step `json:"steps,omitempty"`
}

// WithSteps adds to st the steps of its rollout (or of the pool's rollout
// rec names, when given), read from the history of the driver's branch:
// the driver's Repo must hold the whole history (gitops.WithDepth(0)).
func (d *Driver) WithSteps(ctx context.Context, st *Status) (*Record, error) {
	d.defaults()
	if st.Rollout == nil {
		return nil, nil
	}
	rec, err := ReadRecord(ctx, d.Repo, d.Branch, d.Pool, st.Rollout.ID)
	if err != nil {
		return nil, err
	}
	st.Steps = rec.Steps
	return rec, nil
}

// Status reads the pool's rollout state at the head of the branch.
func (d *Driver) Status(ctx context.Context) (*Status, error) {
	d.defaults()
	v, err := d.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	s := &Status{Pool: d.Pool, Revision: v.commit, Target: v.state.Target, Warming: []string{}, Draining: []string{}, Retained: []string{},
		DrainingRuns: []string{}, Evidence: []runtimeapi.Evidence{}}
	for _, g := range v.state.Generations {
		switch g.State {
		case pool.Active:
			s.Active = g.ID
		case pool.Warming:
			s.Warming = append(s.Warming, g.ID)
		case pool.Draining:
			s.Draining = append(s.Draining, g.ID)
		case pool.Retained:
			s.Retained = append(s.Retained, g.ID)
		}
	}
	if r := v.state.Rollout; r != nil {
		s.Rollout, s.Phase, s.Status = r, r.Phase, r.Status
		s.DrainingRuns = append(s.DrainingRuns, r.Draining...)
		if !r.Terminal() {
			s.Target = r.To
		}
		if r.Evidence != "" {
			ev, err := readEvidence(v.tree, r.Evidence)
			if err != nil {
				return nil, err
			}
			s.Evidence = ev
		}
	}
	return s, nil
}

// Start commits the intent to roll the pool out to generation to (a
// generation already in the config repository): the rollout's first
// commit, phase compatibility. It refuses while another rollout runs, and
// a generation that is already active. With rollback, to must be a
// retained or draining generation (a rollout back to it).
func (d *Driver) Start(ctx context.Context, to string, rollback bool) (*pool.Rollout, error) {
	d.defaults()
	var out *pool.Rollout
	_, err := d.Repo.Update(ctx, gitops.Request{Branch: d.Branch, Author: d.Author, Edit: func(t *gitops.Tree) (*gitops.Commit, error) {
		v, err := readView(t, d.Pool)
		if err != nil {
			return nil, err
		}
		if r := v.state.Rollout; r != nil && !r.Terminal() {
			return nil, fmt.Errorf("%w: %s of pool %s (%s → %s) is %s in phase %s: resume or abort it first", ErrInProgress, r.ID, d.Pool, orNone(r.From), r.To, r.Status, r.Phase)
		}
		g, err := v.generationOf(to)
		if err != nil {
			return nil, err
		}
		if err := g.Validate(v.pool.Spec.RequiredKinds); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrRefused, err)
		}
		active, hasActive := v.state.Active()
		if hasActive && active.ID == to {
			return nil, fmt.Errorf("%w: %s is already the active generation of pool %s", ErrRefused, to, d.Pool)
		}
		prev := genState(v.state, to)
		if rollback {
			if prev == nil || (prev.State != pool.Retained && prev.State != pool.Draining) {
				return nil, fmt.Errorf("%w: %s is not a retained generation of pool %s: a rollback goes back to one", ErrRefused, to, d.Pool)
			}
		} else if prev != nil && prev.State != pool.Warming {
			return nil, fmt.Errorf("%w: %s is a %s generation of pool %s: going back to it is a rollback (rollout rollback)", ErrRefused, to, prev.State, d.Pool)
		}
		now := d.Now().UTC().Truncate(time.Second)
		r := &pool.Rollout{ID: "ro-" + randomHex(6), To: to, Rollback: rollback, Phase: PhaseCompatibility, Status: pool.RolloutRunning,
			Started: now, PhaseStarted: now, PhaseDeadline: now.Add(deadline(v.pool, PhaseCompatibility))}
		if hasActive {
			r.From = active.ID
		}
		v.state.Rollout = r
		v.state.Target = to
		out = r
		verb := "start rollout"
		if rollback {
			verb = "start rollback"
		}
		d.failpoint("before-commit:" + PhaseCompatibility)
		c, err := d.write(v, PhaseCompatibility, fmt.Sprintf("%s %s of pool %s: %s → %s", verb, r.ID, d.Pool, orNone(r.From), to), "")
		return d.acted(c, err, d.Reason)
	}})
	if err != nil {
		return nil, err
	}
	d.failpoint("after-commit:" + PhaseCompatibility)
	d.logf("rollout %s started: %s → %s", out.ID, orNone(out.From), out.To)
	return out, nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func genState(s *pool.State, id string) *pool.GenState {
	for i := range s.Generations {
		if s.Generations[i].ID == id {
			return &s.Generations[i]
		}
	}
	return nil
}

// deadline is the pool's deadline for a phase (pool.Default's when the
// pool does not set it).
func deadline(p *pool.Pool, phase string) time.Duration {
	if d, ok := p.Spec.PhaseDeadlines[phase]; ok && d.Duration > 0 {
		return d.Duration
	}
	return pool.Default(p.Metadata.Name).Spec.PhaseDeadlines[phase].Duration
}

// write renders the state into the tree and describes the commit: one
// commit per step, with trailers naming pool, rollout, generation and
// step.
func (d *Driver) write(v *view, step, subject, body string) (*gitops.Commit, error) {
	b, err := pool.Marshal(v.state)
	if err != nil {
		return nil, err
	}
	if err := v.tree.WriteFile(pool.StateFile(d.Pool), b); err != nil {
		return nil, err
	}
	r := v.state.Rollout
	return &gitops.Commit{Subject: subject, Body: body, Trailers: []gitops.Trailer{
		{Key: "Slipway-Pool", Value: d.Pool},
		{Key: "Slipway-Generation", Value: r.To},
		{Key: "Slipway-Rollout", Value: r.ID},
		{Key: "Slipway-Step", Value: step},
	}}, nil
}

// Abort stops a rollout that has not routed claims yet: the new
// generation's warm capacity is removed, the active generation never
// changed. After routing, a rollback is the way back.
func (d *Driver) Abort(ctx context.Context, reason string) (*pool.Rollout, error) {
	d.defaults()
	var out *pool.Rollout
	_, err := d.Repo.Update(ctx, gitops.Request{Branch: d.Branch, Author: d.Author, Edit: func(t *gitops.Tree) (*gitops.Commit, error) {
		v, err := readView(t, d.Pool)
		if err != nil {
			return nil, err
		}
		r := v.state.Rollout
		if r == nil || r.Terminal() {
			return nil, fmt.Errorf("%w in progress on pool %s", ErrNoRollout, d.Pool)
		}
		if routed(r.Phase) {
			return nil, fmt.Errorf("%w: rollout %s of pool %s already routed claims to %s (phase %s): use rollout rollback", ErrRefused, r.ID, d.Pool, r.To, r.Phase)
		}
		out = r
		c, err := d.rollBack(v, "aborted: "+reason)
		return d.acted(c, err, reason)
	}})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// acted adds the actor and the reason of an operator's action to its
// commit as trailers (one line each).
func (d *Driver) acted(c *gitops.Commit, err error, reason string) (*gitops.Commit, error) {
	if err != nil {
		return nil, err
	}
	if a := oneLine(d.Actor); a != "" {
		c.Trailers = append(c.Trailers, gitops.Trailer{Key: TrailerActor, Value: a})
	}
	if r := oneLine(reason); r != "" {
		c.Trailers = append(c.Trailers, gitops.Trailer{Key: TrailerReason, Value: r})
	}
	return c, nil
}

// Trailers of an operator's action on a rollout.
const (
	TrailerActor  = "Slipway-Actor"
	TrailerReason = "Slipway-Reason"
)

// oneLine is s on one line: its control characters as spaces, each run
// of spaces (a line break, a form's CR LF) as one: a trailer's value.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)), " ")
}

// routed reports whether a phase comes after claims moved to the new
// generation.
func routed(phase string) bool {
	i := slices.Index(Phases, phase)
	return i >= slices.Index(Phases, PhaseRoute)
}

// rollBack ends a rollout that did not route: the new generation leaves
// the pool's warm set (its warm capacity is removed by the runtime), the
// active generation stays, and the reason is recorded.
func (d *Driver) rollBack(v *view, reason string) (*gitops.Commit, error) {
	r := v.state.Rollout
	if e := genState(v.state, r.To); e != nil && e.State == pool.Warming {
		if r.Rollback {
			e.State, e.WarmSize, e.Since = pool.Retained, 0, d.Now().UTC().Truncate(time.Second)
		} else {
			v.state.Generations = slices.DeleteFunc(v.state.Generations, func(g pool.GenState) bool { return g.ID == r.To })
		}
	}
	if a, ok := v.state.Active(); ok {
		v.state.Target = a.ID
	}
	r.Status, r.Reason, r.Holder, r.LeaseUntil = pool.RolloutRolledBack, reason, "", time.Time{}
	r.Ended = d.Now().UTC().Truncate(time.Second)
	return d.write(v, "rolled-back", fmt.Sprintf("roll back %s of pool %s: %s stays active", r.ID, d.Pool, orNone(r.From)), reason)
}

// holderAlive reports whether a lease holder named host/pid/… on this
// host still runs (a holder on another host is taken as alive).
func holderAlive(holder string) bool {
	parts := strings.SplitN(holder, "/", 3)
	if len(parts) < 2 {
		return true
	}
	host, _ := os.Hostname()
	if parts[0] != host {
		return true
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return true
	}
	if pid == os.Getpid() {
		return true
	}
	_, err = os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}
