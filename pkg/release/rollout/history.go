package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/internal/idprefix"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
)

// Step results in a Record.
const (
	StepPassed     = "passed"
	StepRunning    = "running"
	StepFailed     = "failed"
	StepRolledBack = "rolled back"
	StepRetained   = "retained"
	StepNotReached = "not reached"
)

// Step is one of a rollout's seven steps as its commits record it.
type Step struct {
	// Number is 1 to 7; Phase its name (Phases).
	Number int    `json:"number"`
	Phase  string `json:"phase"`
	// Result is passed, running, failed, rolled back, retained (step 7)
	// or not reached.
	Result string `json:"result"`
	// Started is when the step began (the commit that entered it); Ended
	// when its result was committed (zero while it runs).
	Started time.Time `json:"started,omitzero"`
	Ended   time.Time `json:"ended,omitzero"`
	// Commit recorded the result (or entered the step, while it runs).
	Commit string `json:"commit,omitempty"`
	// Evidence is what the result's commit says proved it, or why it
	// failed.
	Evidence string `json:"evidence,omitempty"`
	// Deadline is the phase deadline of the step that runs (zero for
	// every other step).
	Deadline time.Time `json:"deadline,omitzero"`
	// Failures counts the visible failures the step was resumed after.
	Failures int `json:"failures,omitempty"`
}

// Took is how long the step took (until now while it runs; 0 when it
// has not started).
func (s Step) Took(now time.Time) time.Duration {
	switch {
	case s.Started.IsZero():
		return 0
	case s.Ended.IsZero():
		return now.Sub(s.Started).Round(time.Second)
	}
	return s.Ended.Sub(s.Started).Round(time.Second)
}

// Record is one rollout of a pool, read back from the config repository's
// history: the commits with its Slipway-Rollout trailer, and desired.yaml
// at the last of them.
type Record struct {
	ID       string `json:"id"`
	Pool     string `json:"pool"`
	From     string `json:"from,omitempty"`
	To       string `json:"to"`
	Rollback bool   `json:"rollback,omitempty"`
	// Outcome is the rollout's status: running, succeeded, rolled-back or
	// failed.
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	// Phase is where it stands or ended.
	Phase   string    `json:"phase"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	// Seconds is how long it took (until its last commit when it has not
	// ended).
	Seconds float64 `json:"seconds"`
	// Holder drives it (while it runs).
	Holder string `json:"holder,omitempty"`
	// Evidence is the folder of its proof evidence.
	Evidence string `json:"evidence,omitempty"`
	// Commits are its commits, oldest first; Steps the seven steps.
	Commits []string `json:"commits"`
	Steps   []Step   `json:"steps"`
	// Actions are the operators' actions on it (start, abort), oldest
	// first, read from their commits' Slipway-Actor and Slipway-Reason
	// trailers.
	Actions []Action `json:"actions,omitempty"`
}

// Action is an operator's action on a rollout, as its commit records it.
type Action struct {
	// Step is the commit's Slipway-Step (compatibility for a start,
	// rolled-back for an abort).
	Step   string    `json:"step"`
	Actor  string    `json:"actor,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Commit string    `json:"commit"`
	At     time.Time `json:"at"`
}

// Duration is how long the rollout took (Seconds).
func (r *Record) Duration() time.Duration { return time.Duration(r.Seconds * float64(time.Second)) }

// History reads every rollout of pool from the history of branch, newest
// first. The repository must hold the whole history (gitops.WithDepth(0)).
func History(ctx context.Context, repo *gitops.Repo, branch, poolName string) ([]*Record, error) {
	return history(ctx, repo, branch, poolName, "")
}

// ReadRecord reads the rollout of pool that idOrPrefix names (a whole
// rollout id, or a unique prefix of at least 6 characters after ro-),
// stopping at its first commit; "" is the pool's newest rollout. A prefix
// that names none, or several, is an idprefix error (ErrNoMatch,
// ErrTooShort, *AmbiguousError).
func ReadRecord(ctx context.Context, repo *gitops.Repo, branch, poolName, idOrPrefix string) (*Record, error) {
	if idOrPrefix == "" {
		rs, err := history(ctx, repo, branch, poolName, "newest")
		if err != nil {
			return nil, err
		}
		if len(rs) == 0 {
			return nil, fmt.Errorf("%w: pool %s has had no rollout in %s", ErrNoRollout, poolName, repo.URL())
		}
		return rs[0], nil
	}
	if err := idprefix.Check(idOrPrefix, "ro-", "rollout"); err != nil {
		return nil, err
	}
	rs, err := history(ctx, repo, branch, poolName, idOrPrefix)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	id, err := idprefix.Resolve(idOrPrefix, "ro-", "rollout", "pool "+poolName+" of "+repo.URL(), ids)
	if err != nil {
		return nil, err
	}
	return rs[slices.Index(ids, id)], nil
}

// ResolveID is the whole id of the pool's rollout idOrPrefix names.
func ResolveID(ctx context.Context, repo *gitops.Repo, branch, poolName, idOrPrefix string) (string, error) {
	r, err := ReadRecord(ctx, repo, branch, poolName, idOrPrefix)
	if err != nil {
		return "", err
	}
	return r.ID, nil
}

// history walks the log, newest first. want "" reads every rollout;
// "newest" stops at the newest one's first commit; a whole id stops at
// that rollout's first commit; a prefix reads the whole history (to find
// every candidate) and keeps the rollouts it starts.
func history(ctx context.Context, repo *gitops.Repo, branch, poolName, want string) ([]*Record, error) {
	if branch == "" {
		branch = "main"
	}
	type group struct {
		id      string
		entries []*gitops.LogEntry // newest first
	}
	var groups []*group
	byID := map[string]*group{}
	err := repo.Log(ctx, branch, func(e *gitops.LogEntry) error {
		id := e.Trailer("Slipway-Rollout")
		if id == "" || e.Trailer("Slipway-Pool") != poolName {
			return nil
		}
		g := byID[id]
		if g == nil {
			if want == "newest" && len(groups) == 1 {
				return gitops.ErrStopLog
			}
			g = &group{id: id}
			byID[id] = g
			groups = append(groups, g)
		}
		g.entries = append(g.entries, e)
		if e.Trailer("Slipway-Step") == PhaseCompatibility && (want == "newest" || want == id) {
			return gitops.ErrStopLog
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]*Record, 0, len(groups))
	for _, g := range groups {
		if want != "" && want != "newest" && !strings.HasPrefix(g.id, want) {
			continue
		}
		slices.Reverse(g.entries)
		r, err := record(poolName, g.id, g.entries)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// record rebuilds one rollout from its commits, oldest first.
func record(poolName, id string, entries []*gitops.LogEntry) (*Record, error) {
	last := entries[len(entries)-1]
	r := &Record{ID: id, Pool: poolName, To: last.Trailer("Slipway-Generation"), Started: entries[0].Time.UTC(), Outcome: pool.RolloutRunning}
	var state *pool.Rollout
	if t, err := last.Tree(); err == nil {
		if st, err := pool.ReadState(poolName, t.ReadFile); err == nil && st.Rollout != nil && st.Rollout.ID == id {
			state = st.Rollout
		} else if err != nil && !errors.Is(err, gitops.ErrNotExist) {
			return nil, err
		}
	}
	if state != nil {
		r.From, r.To, r.Rollback, r.Outcome, r.Reason, r.Phase = state.From, state.To, state.Rollback, state.Status, state.Reason, state.Phase
		r.Started, r.Ended, r.Holder, r.Evidence = state.Started.UTC(), state.Ended.UTC(), state.Holder, state.Evidence
	}
	r.Steps = make([]Step, len(Phases))
	for i, p := range Phases {
		r.Steps[i] = Step{Number: i + 1, Phase: p, Result: StepNotReached}
	}
	cur := -1 // the step being worked on
	// what a step's deadline did (step 5's drain-stop, drain-wait or
	// drain-checkpoint), kept beside the note of the commit that passes it
	deadlineDid := make([]string, len(Phases))
	for _, e := range entries {
		r.Commits = append(r.Commits, e.Commit)
		at := e.Time.UTC()
		step := e.Trailer("Slipway-Step")
		if a, why := e.Trailer(TrailerActor), e.Trailer(TrailerReason); a != "" || why != "" {
			r.Actions = append(r.Actions, Action{Step: step, Actor: a, Reason: why, Commit: e.Commit, At: at})
		}
		switch k := slices.Index(Phases, step); {
		case k == 0:
			cur = 0
			r.Steps[0] = Step{Number: 1, Phase: Phases[0], Result: StepRunning, Started: at, Commit: e.Commit}
		case k > 0:
			if cur >= 0 && cur < k {
				s := &r.Steps[cur]
				s.Result, s.Ended, s.Commit, s.Evidence = StepPassed, at, e.Commit, passedNote(e.Body)
				if deadlineDid[cur] != "" {
					s.Evidence += "; " + deadlineDid[cur]
				}
			}
			cur = k
			s := &r.Steps[k]
			s.Result, s.Started, s.Ended, s.Commit, s.Evidence = StepRunning, at, time.Time{}, e.Commit, ""
			if step == PhaseRetain {
				s.Result, s.Ended, s.Evidence = StepRetained, at, retainNote(e.Body, r.From)
			}
		case cur < 0:
		case step == "failed":
			s := &r.Steps[cur]
			s.Result, s.Ended, s.Commit, s.Evidence = StepFailed, at, e.Commit, firstLine(e.Body)
		case step == "rolled-back":
			s := &r.Steps[cur]
			s.Result, s.Ended, s.Commit, s.Evidence = StepRolledBack, at, e.Commit, firstLine(e.Body)
		case step == "lease" && strings.HasPrefix(e.Subject, "resume "):
			s := &r.Steps[cur]
			if s.Result == StepFailed {
				s.Failures++
				s.Result, s.Ended = StepRunning, time.Time{}
			}
		case step == "drain-stop" || step == "drain-wait" || step == "drain-checkpoint":
			deadlineDid[cur] = drainNote(step, e.Body, r.To)
			r.Steps[cur].Evidence = deadlineDid[cur]
		}
	}
	if state == nil {
		r.Phase = Phases[max(cur, 0)]
		for _, s := range r.Steps {
			switch s.Result {
			case StepFailed:
				r.Outcome = pool.RolloutFailed
			case StepRolledBack:
				r.Outcome = pool.RolloutRolledBack
			case StepRetained:
				r.Outcome = pool.RolloutSucceeded
			}
		}
	}
	if cur >= 0 && r.Steps[cur].Result == StepRunning && state != nil && state.Status == pool.RolloutRunning {
		r.Steps[cur].Deadline = state.PhaseDeadline.UTC()
	}
	end := r.Ended
	if end.IsZero() {
		end = last.Time.UTC()
	}
	r.Seconds = end.Sub(r.Started).Seconds()
	return r, nil
}

// drainNote is what step 5's drain deadline did, read from the body of
// its commit (drain-stop, drain-wait or drain-checkpoint), which names
// each run: how many runs it stopped, waited for, or checkpointed and
// resumed on generation to (and those it did not move, and why not).
func drainNote(step, body, to string) string {
	lists := map[string][]string{}
	for _, l := range strings.Split(body, "\n") {
		label, rest, ok := strings.Cut(strings.TrimSpace(l), ": ")
		if !ok {
			continue
		}
		switch label {
		case "Stopped", "Still running": // one line: the runs, comma separated
			for _, id := range strings.Split(rest, ", ") {
				if id = strings.TrimSpace(id); id != "" {
					lists[label] = append(lists[label], id)
				}
			}
		case "Checkpointed": // a line per run: "RUN at DIGEST, resumed on ..."
			id, _, _ := strings.Cut(rest, " ")
			lists[label] = append(lists[label], id)
		case "Not moved": // "RUN, suspended at DIGEST: why" or "RUN, still open on GEN: why"
			id, how, _ := strings.Cut(rest, ", ")
			if strings.HasPrefix(how, "suspended at ") {
				lists["suspended"] = append(lists["suspended"], id)
			} else {
				lists["open"] = append(lists["open"], id)
			}
		}
	}
	runs := func(ids []string) string {
		if len(ids) == 0 {
			return ""
		}
		return " (" + strings.Join(ids, ", ") + ")"
	}
	switch step {
	case "drain-stop":
		return "drain deadline: " + plural(len(lists["Stopped"]), "run") + " stopped" + runs(lists["Stopped"])
	case "drain-wait":
		return "drain deadline passed: waited for " + plural(len(lists["Still running"]), "run") + runs(lists["Still running"])
	}
	note := "drain deadline: " + plural(len(lists["Checkpointed"]), "run") + " checkpointed and resumed on " + to + runs(lists["Checkpointed"])
	if n := lists["suspended"]; len(n) > 0 {
		note += ", " + plural(len(n), "run") + " checkpointed but not resumed" + runs(n)
	}
	if n := lists["open"]; len(n) > 0 {
		note += ", " + plural(len(n), "run") + " not checkpointed" + runs(n)
	}
	return note
}

// passedNote is what a step's result commit says proved it: the body's
// "Step N passed: ..." line without its label.
func passedNote(body string) string {
	l := firstLine(body)
	if _, rest, ok := strings.Cut(l, ": "); ok && strings.HasPrefix(l, "Step ") {
		l = rest
	}
	return strings.TrimSuffix(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(l), ".")), ":")
}

func retainNote(body, from string) string {
	for _, l := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(l, "Step 7: "); ok {
			return strings.TrimSuffix(rest, ".")
		}
	}
	if from == "" {
		return "no previous generation to retain"
	}
	return ""
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}
