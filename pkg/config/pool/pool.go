package pool

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/slipway-dev/slipway/internal/strictyaml"
	"github.com/slipway-dev/slipway/pkg/config/generation"
)

// Document identity.
const (
	APIVersion     = "slipway.dev/v1alpha1"
	KindPool       = "Pool"
	KindPoolState  = "PoolState"
	PolicyPath     = "policies/verification.yaml"
	maxDocumentLen = 1 << 20
)

// ErrInvalid marks a pool document that does not parse or validate.
var ErrInvalid = errors.New("invalid pool document")

var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidName reports whether name can name a pool (an RFC 1123 label).
func ValidName(name string) bool { return namePattern.MatchString(name) }

// Dir is the pool's folder in the config repository.
func Dir(pool string) string { return path.Join("pools", pool) }

// PoolFile, StateFile, KustomizationFile and GenerationsDir are the
// pool's files.
func PoolFile(pool string) string          { return path.Join(Dir(pool), "pool.yaml") }
func StateFile(pool string) string         { return path.Join(Dir(pool), "desired.yaml") }
func KustomizationFile(pool string) string { return path.Join(Dir(pool), "kustomization.yaml") }
func GenerationsDir(pool string) string    { return path.Join(Dir(pool), "generations") }

// GenerationFile is where generation id of pool is stored.
func GenerationFile(pool, id string) string { return path.Join(GenerationsDir(pool), id+".yaml") }

// Duration is a time.Duration written as "30s" or "5m".
type Duration struct{ time.Duration }

// UnmarshalYAML reads "30s"-style durations.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration (like 30s, 5m, 24h)", n.Line, s)
	}
	d.Duration = v
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// Pool is pools/<pool>/pool.yaml.
type Pool struct {
	APIVersion string   `yaml:"apiVersion" json:"apiVersion"`
	Kind       string   `yaml:"kind" json:"kind"`
	Metadata   Metadata `yaml:"metadata" json:"metadata"`
	Spec       Spec     `yaml:"spec" json:"spec"`
}

// Metadata names the pool.
type Metadata struct {
	Name string `yaml:"name" json:"name"`
}

// Spec are a pool's settings.
type Spec struct {
	// RequiredKinds must be pinned by every generation of the pool.
	RequiredKinds []generation.Kind `yaml:"requiredKinds" json:"requiredKinds"`
	// WarmSize is how many ready sandboxes the active generation keeps.
	WarmSize int `yaml:"warmSize" json:"warmSize"`
	// RefillPerSecond bounds how fast warm sandboxes are created.
	RefillPerSecond float64 `yaml:"refillPerSecond" json:"refillPerSecond"`
	// ReadyTimeout is how long a sandbox may take to become ready.
	ReadyTimeout Duration `yaml:"readyTimeout" json:"readyTimeout"`
	// PhaseDeadlines bound each rollout phase (phase name to duration).
	PhaseDeadlines map[string]Duration `yaml:"phaseDeadlines,omitempty" json:"phaseDeadlines,omitempty"`
	// DrainDeadline is how long old claims may run after routing moved.
	DrainDeadline Duration `yaml:"drainDeadline" json:"drainDeadline"`
	// OnDrainDeadline is "wait" (keep waiting, listed), "stop" (end the
	// old generation's runs) or "checkpoint" (suspend them and resume them
	// on the new generation, on a runtime that keeps checkpoints).
	OnDrainDeadline string `yaml:"onDrainDeadline" json:"onDrainDeadline"`
	// RollbackWindow and RestoreWindow keep old generations' artifacts.
	RollbackWindow Duration `yaml:"rollbackWindow" json:"rollbackWindow"`
	RestoreWindow  Duration `yaml:"restoreWindow" json:"restoreWindow"`
	// Network is what a sandbox may reach.
	Network Network `yaml:"network" json:"network"`
	// Limits bound each sandbox (see Limits); AcceptUnenforced names the
	// limits the pool accepts running without where the runtime's host
	// cannot enforce them. A runtime refuses to serve a pool with a limit
	// it cannot enforce that is not listed there.
	Limits           Limits   `yaml:"limits,omitempty" json:"limits,omitzero"`
	AcceptUnenforced []string `yaml:"acceptUnenforced,omitempty" json:"acceptUnenforced,omitempty"`
	// Proofs are the checks a rollout runs before routing claims.
	Proofs []string `yaml:"proofs,omitempty" json:"proofs,omitempty"`
	// Kubernetes holds what only rendering for Kubernetes uses.
	Kubernetes *Kubernetes `yaml:"kubernetes,omitempty" json:"kubernetes,omitempty"`
}

// Kubernetes are a pool's settings for rendering on Kubernetes.
type Kubernetes struct {
	// NodeImageLabel, if set, is the node label (a qualified label key)
	// whose value names a node's image: a generation pinning a nodeImage
	// schedules its sandboxes only onto nodes labelled with that pin.
	NodeImageLabel string `yaml:"nodeImageLabel,omitempty" json:"nodeImageLabel,omitempty"`
}

// labelKeyPattern is a Kubernetes qualified name with an optional DNS
// subdomain prefix: [prefix/]name.
var (
	labelNamePattern   = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	labelPrefixPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// ValidLabelKey reports whether k is a Kubernetes label key.
func ValidLabelKey(k string) bool {
	prefix, name, ok := strings.Cut(k, "/")
	if !ok {
		return labelNamePattern.MatchString(k)
	}
	return len(prefix) <= 253 && labelPrefixPattern.MatchString(prefix) && labelNamePattern.MatchString(name)
}

// Network is "deny" or an allow-list of host:port.
type Network struct {
	Mode  string   `yaml:"mode" json:"mode"`
	Allow []string `yaml:"allow,omitempty" json:"allow,omitempty"`
}

// Phases a deadline can be set for, and the proofs a rollout can run.
var (
	Phases = []string{"compatibility", "warm", "prove", "route", "drain", "remove", "retain"}
	Proofs = []string{"allocate", "identity", "network", "template-tests", "workspace-writable", "cleanup"}
)

// Default returns the settings `slipway config init` seeds a pool with.
func Default(name string) *Pool {
	return &Pool{
		APIVersion: APIVersion, Kind: KindPool, Metadata: Metadata{Name: name},
		Spec: Spec{
			RequiredKinds:   []generation.Kind{generation.ControlPlane, generation.Runner, generation.WorkspaceTemplate},
			WarmSize:        2,
			RefillPerSecond: 2,
			ReadyTimeout:    Duration{30 * time.Second},
			PhaseDeadlines: map[string]Duration{
				"compatibility": {time.Minute}, "warm": {5 * time.Minute}, "prove": {5 * time.Minute},
				"route": {time.Minute}, "drain": {30 * time.Minute}, "remove": {5 * time.Minute}, "retain": {time.Minute},
			},
			DrainDeadline:   Duration{30 * time.Minute},
			OnDrainDeadline: "wait",
			RollbackWindow:  Duration{24 * time.Hour},
			RestoreWindow:   Duration{7 * 24 * time.Hour},
			Network:         Network{Mode: "deny"},
			Proofs:          slices.Clone(Proofs),
		},
	}
}

// ParsePool decodes and validates pool.yaml; name labels errors.
func ParsePool(b []byte, name string) (*Pool, error) {
	var p Pool
	doc, err := decode(b, name, &p)
	if err != nil {
		return nil, err
	}
	fe := func(field, format string, args ...any) error { return fieldError(name, doc, field, format, args...) }
	if p.APIVersion != APIVersion || p.Kind != KindPool {
		return nil, fe("kind", "want apiVersion %s, kind %s", APIVersion, KindPool)
	}
	if !ValidName(p.Metadata.Name) {
		return nil, fe("metadata.name", "%q is not a pool name (lower-case letters, digits, '-')", p.Metadata.Name)
	}
	s := p.Spec
	if len(s.RequiredKinds) == 0 {
		return nil, fe("spec.requiredKinds", "required: which kinds must every generation pin?")
	}
	for i, k := range s.RequiredKinds {
		if !k.Valid() {
			return nil, fe(fmt.Sprintf("spec.requiredKinds[%d]", i), "unknown kind %q", k)
		}
	}
	switch {
	case s.WarmSize < 0:
		return nil, fe("spec.warmSize", "%d < 0", s.WarmSize)
	case s.RefillPerSecond <= 0:
		return nil, fe("spec.refillPerSecond", "must be above 0")
	case s.ReadyTimeout.Duration <= 0:
		return nil, fe("spec.readyTimeout", "required, above 0")
	case s.OnDrainDeadline != "wait" && s.OnDrainDeadline != "stop" && s.OnDrainDeadline != "checkpoint":
		return nil, fe("spec.onDrainDeadline", "%q: want wait, stop or checkpoint", s.OnDrainDeadline)
	case s.Network.Mode != "deny" && s.Network.Mode != "allow-list":
		return nil, fe("spec.network.mode", "%q: want deny or allow-list", s.Network.Mode)
	case s.Network.Mode == "deny" && len(s.Network.Allow) > 0:
		return nil, fe("spec.network.allow", "an allow list with mode deny")
	}
	if field, err := validateLimits(&s); err != nil {
		return nil, fe(field, "%v", err)
	}
	if k := s.Kubernetes; k != nil && k.NodeImageLabel != "" && !ValidLabelKey(k.NodeImageLabel) {
		return nil, fe("spec.kubernetes.nodeImageLabel", "%q is not a Kubernetes label key ([prefix/]name)", k.NodeImageLabel)
	}
	for ph := range s.PhaseDeadlines {
		if !slices.Contains(Phases, ph) {
			return nil, fe("spec.phaseDeadlines", "unknown phase %q (%s)", ph, strings.Join(Phases, ", "))
		}
	}
	for i, pr := range s.Proofs {
		if !slices.Contains(Proofs, pr) {
			return nil, fe(fmt.Sprintf("spec.proofs[%d]", i), "unknown proof %q (%s)", pr, strings.Join(Proofs, ", "))
		}
	}
	return &p, nil
}

// Generation states in a PoolState.
const (
	Warming  = "warming"
	Active   = "active"
	Draining = "draining"
	Retained = "retained"
)

// State is pools/<pool>/desired.yaml.
type State struct {
	APIVersion  string         `yaml:"apiVersion" json:"apiVersion"`
	Kind        string         `yaml:"kind" json:"kind"`
	Pool        string         `yaml:"pool" json:"pool"`
	Generations []GenState     `yaml:"generations" json:"generations"`
	Target      string         `yaml:"target,omitempty" json:"target,omitempty"`
	Rollout     *Rollout       `yaml:"rollout,omitempty" json:"rollout,omitempty"`
	History     []HistoryEntry `yaml:"history,omitempty" json:"history,omitempty"`
}

// GenState is one generation the pool holds.
type GenState struct {
	ID       string    `yaml:"id" json:"id"`
	Sequence int64     `yaml:"sequence" json:"sequence"`
	State    string    `yaml:"state" json:"state"`
	WarmSize int       `yaml:"warmSize" json:"warmSize"`
	Since    time.Time `yaml:"since" json:"since"`
}

// Rollout is the pool's rollout, in progress or the last one: which
// generation moves to which, the phase, how it ended, and who drives it
// until when (the lease). Each change is one commit (Slipway-Step
// trailers); a crashed driver resumes from here.
type Rollout struct {
	ID string `yaml:"id" json:"id"`
	// From was active when the rollout started ("" on a pool without one);
	// To is the generation rolled out.
	From string `yaml:"from,omitempty" json:"from,omitempty"`
	To   string `yaml:"to" json:"to"`
	// Rollback marks a rollout back to a retained generation.
	Rollback bool `yaml:"rollback,omitempty" json:"rollback,omitempty"`
	// Phase is the step being worked on (Phases), or where it ended.
	Phase string `yaml:"phase" json:"phase"`
	// Status is running, succeeded, rolled-back or failed (a visible,
	// resumable failure: Reason says why, Holder and PhaseDeadline whose
	// and until when).
	Status        string    `yaml:"status" json:"status"`
	Reason        string    `yaml:"reason,omitempty" json:"reason,omitempty"`
	Started       time.Time `yaml:"started" json:"started"`
	PhaseStarted  time.Time `yaml:"phaseStarted" json:"phaseStarted"`
	PhaseDeadline time.Time `yaml:"phaseDeadline" json:"phaseDeadline"`
	// Ended is when the rollout succeeded or rolled back.
	Ended time.Time `yaml:"ended,omitempty" json:"ended,omitzero"`
	// Holder drives the rollout until LeaseUntil.
	Holder     string    `yaml:"holder,omitempty" json:"holder,omitempty"`
	LeaseUntil time.Time `yaml:"leaseUntil,omitempty" json:"leaseUntil,omitzero"`
	// Evidence is the folder of the rollout's proof evidence.
	Evidence string `yaml:"evidence,omitempty" json:"evidence,omitempty"`
	// Draining lists the runs of From still open when last looked at.
	Draining []string `yaml:"draining,omitempty" json:"draining,omitempty"`
}

// Rollout statuses.
const (
	RolloutRunning    = "running"
	RolloutSucceeded  = "succeeded"
	RolloutRolledBack = "rolled-back"
	RolloutFailed     = "failed"
)

// Terminal reports whether the rollout ended (succeeded or rolled back); a
// failed one can be resumed.
func (r *Rollout) Terminal() bool {
	return r.Status == RolloutSucceeded || r.Status == RolloutRolledBack
}

// HistoryEntry records one promotion (the highest sequence is derived
// from the generations folder, this is for people).
type HistoryEntry struct {
	Target   string    `yaml:"target" json:"target"`
	Sequence int64     `yaml:"sequence" json:"sequence"`
	At       time.Time `yaml:"at" json:"at"`
	Rollback bool      `yaml:"rollback,omitempty" json:"rollback,omitempty"`
}

// NewState is the state of a pool with nothing promoted yet.
func NewState(pool string) *State {
	return &State{APIVersion: APIVersion, Kind: KindPoolState, Pool: pool, Generations: []GenState{}}
}

// Active returns the active generation, if any.
func (s *State) Active() (GenState, bool) {
	for _, g := range s.Generations {
		if g.State == Active {
			return g, true
		}
	}
	return GenState{}, false
}

// ReadPool reads and parses pool name's pool.yaml with read (a config
// repository tree's ReadFile).
func ReadPool(name string, read func(path string) ([]byte, error)) (*Pool, error) {
	b, err := read(PoolFile(name))
	if err != nil {
		return nil, err
	}
	return ParsePool(b, PoolFile(name))
}

// ReadState reads and parses pool name's desired.yaml with read (a config
// repository tree's ReadFile). A pool without one (read's error matches
// fs.ErrNotExist) has nothing promoted yet: NewState.
func ReadState(name string, read func(path string) ([]byte, error)) (*State, error) {
	b, err := read(StateFile(name))
	if errors.Is(err, fs.ErrNotExist) {
		return NewState(name), nil
	}
	if err != nil {
		return nil, err
	}
	return ParseState(b, StateFile(name))
}

// ParseState decodes and validates desired.yaml; name labels errors.
func ParseState(b []byte, name string) (*State, error) {
	var s State
	doc, err := decode(b, name, &s)
	if err != nil {
		return nil, err
	}
	fe := func(field, format string, args ...any) error { return fieldError(name, doc, field, format, args...) }
	if s.APIVersion != APIVersion || s.Kind != KindPoolState {
		return nil, fe("kind", "want apiVersion %s, kind %s", APIVersion, KindPoolState)
	}
	if !ValidName(s.Pool) {
		return nil, fe("pool", "%q is not a pool name", s.Pool)
	}
	active := 0
	seen := map[string]bool{}
	for i, g := range s.Generations {
		f := fmt.Sprintf("generations[%d]", i)
		if !strings.HasPrefix(g.ID, "g-") {
			return nil, fe(f+".id", "%q is not a generation id", g.ID)
		}
		if seen[g.ID] {
			return nil, fe(f+".id", "%s listed twice", g.ID)
		}
		seen[g.ID] = true
		switch g.State {
		case Active:
			active++
		case Warming, Draining, Retained:
		default:
			return nil, fe(f+".state", "%q: want warming, active, draining or retained", g.State)
		}
	}
	if active > 1 {
		return nil, fe("generations", "%d generations are active; at most one may be", active)
	}
	if r := s.Rollout; r != nil {
		switch {
		case r.ID == "":
			return nil, fe("rollout.id", "required")
		case !strings.HasPrefix(r.To, "g-"):
			return nil, fe("rollout.to", "%q is not a generation id", r.To)
		case !slices.Contains(Phases, r.Phase):
			return nil, fe("rollout.phase", "%q: want one of %s", r.Phase, strings.Join(Phases, ", "))
		case r.Status != RolloutRunning && r.Status != RolloutSucceeded && r.Status != RolloutRolledBack && r.Status != RolloutFailed:
			return nil, fe("rollout.status", "%q: want running, succeeded, rolled-back or failed", r.Status)
		}
	}
	if s.Generations == nil {
		s.Generations = []GenState{}
	}
	return &s, nil
}

// Marshal writes a pool document (Pool or State) as YAML.
func Marshal(v any) ([]byte, error) {
	return yaml.Marshal(v)
}

func decode(b []byte, name string, v any) (*strictyaml.Doc, error) {
	if len(b) > maxDocumentLen {
		return nil, fmt.Errorf("%s: %w: %d bytes, over the limit of %d", name, ErrInvalid, len(b), maxDocumentLen)
	}
	doc, err := strictyaml.Decode(b, v)
	if err != nil {
		var e *strictyaml.Error
		if errors.As(err, &e) {
			return nil, fmt.Errorf("%s:%d: %w: %s", name, e.Line, ErrInvalid, e.Msg)
		}
		return nil, fmt.Errorf("%s: %w: %v", name, ErrInvalid, err)
	}
	return doc, nil
}

func fieldError(name string, doc *strictyaml.Doc, field, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s: %w: %s", name, doc.Line(field), field, ErrInvalid, fmt.Sprintf(format, args...))
}
