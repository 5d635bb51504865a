package runtimeapi

import (
	"fmt"
	"time"
)

// Info is GET /v1/info: what this runtime speaks and how current its view
// of the config repository is. A rollout checks a generation's
// compatibility against it (step 1) and waits for ObservedRevision to
// reach each step's commit.
type Info struct {
	ControlPlaneProtocol ProtocolRange `json:"controlPlaneProtocol"`
	RunnerProtocol       ProtocolRange `json:"runnerProtocol"`
	// ObservedRevision is the config repository commit the runtime serves
	// from, ObservedAt when it last confirmed it current.
	ObservedRevision string    `json:"observedRevision,omitempty"`
	ObservedAt       time.Time `json:"observedAt,omitzero"`
	LastSyncError    string    `json:"lastSyncError,omitempty"`
	// Limits and Network say how sandboxes are confined here.
	Limits  LimitsInfo `json:"limits"`
	Network string     `json:"network"`
}

// ProtocolRange is a range of protocol versions, both ends included (a
// generation's compatibility names its ranges the same way).
type ProtocolRange struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// Contains reports whether v is in r.
func (r ProtocolRange) Contains(v int) bool { return r.Min <= v && v <= r.Max }

// Overlaps reports whether some version is in both r and o: whether one
// peer can serve a generation of each.
func (r ProtocolRange) Overlaps(o ProtocolRange) bool { return r.Min <= o.Max && o.Min <= r.Max }

func (r ProtocolRange) String() string { return fmt.Sprintf("%d..%d", r.Min, r.Max) }

// LimitsInfo says which of pool.yaml's limits (spec.limits) this runtime's
// backend enforces, and how. Each limit in Enforced is one the runtime
// proved at its start that it can apply on this host (it set the limit on
// a probe and read it back from the kernel). A pool setting one not in
// Enforced, or above its Max, is refused unless its spec.acceptUnenforced
// names it.
type LimitsInfo struct {
	// Cgroup is the cgroup tree sandboxes are put in: "v2", "v1" or "none".
	Cgroup string `json:"cgroup"`
	// Enforced lists the limit names (cpu, memory, pids, openFiles,
	// workspace) enforced here; How says with what.
	Enforced []string          `json:"enforced"`
	How      map[string]string `json:"how,omitempty"`
	// Max is the largest value of a limit this host can apply, where
	// there is one (openFiles: the runtime's hard RLIMIT_NOFILE).
	Max map[string]uint64 `json:"max,omitempty"`
	// Unavailable says why a limit is not enforced, where one is not.
	Unavailable string `json:"unavailable,omitempty"`
	// Description says in words how commands are bounded.
	Description string `json:"description"`
}

// SyncResult answers POST /v1/sync: the revision the runtime serves from
// after reading the config repository.
type SyncResult struct {
	ObservedRevision string `json:"observedRevision"`
}

// PoolStatus is GET /v1/pools/{pool}: per generation, what the runtime
// runs. Generations the desired state no longer names but that still have
// sandboxes are listed too (State "").
type PoolStatus struct {
	Pool             string             `json:"pool"`
	ObservedRevision string             `json:"observedRevision"`
	Generations      []GenerationStatus `json:"generations"`
}

// Generation returns the status of generation id (zero counts if the
// runtime runs nothing of it).
func (p *PoolStatus) Generation(id string) GenerationStatus {
	for _, g := range p.Generations {
		if g.ID == id {
			return g
		}
	}
	return GenerationStatus{ID: id}
}

// GenerationStatus is one generation's sandboxes in a pool.
type GenerationStatus struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Ready   int    `json:"warmReady"`
	Warming int    `json:"warming"`
	Claimed int    `json:"claimed"`
	// Runs are the open claims' run ids (Claimed of them).
	Runs []string `json:"runs"`
	// Sandboxes are the generation's live sandboxes, warm and claimed.
	Sandboxes []SandboxStatus `json:"sandboxes"`
}

// SandboxStatus is one sandbox as pool status shows it: what it was made
// from never changes for its life.
type SandboxStatus struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
	// State is the sandbox's state as its backend says it: "creating",
	// "running", "dead", ...
	State string `json:"state"`
	// RunnerImageDigest is the digest of the runner IMAGE the sandbox's
	// generation pins ("" when the runtime no longer has that generation);
	// RunnerBinarySHA256 the sha256 of the runner BINARY the sandbox runs.
	RunnerImageDigest  string `json:"runnerImageDigest"`
	RunnerBinarySHA256 string `json:"runnerBinarySha256"`
	TemplateID         string `json:"templateId"`
}

// ProofRequest is POST /v1/pools/{pool}/proofs: run proof checks on a
// proof claim of a warming (or active) generation for a rollout. Proof
// claims never count as traffic.
type ProofRequest struct {
	Generation string   `json:"generation"`
	Rollout    string   `json:"rollout"`
	Checks     []string `json:"checks"`
}

// ProofResult is the answer: one piece of evidence per check, in order.
type ProofResult struct {
	Pool       string     `json:"pool"`
	Generation string     `json:"generation"`
	Rollout    string     `json:"rollout"`
	RunID      string     `json:"runId,omitempty"`
	SandboxID  string     `json:"sandboxId,omitempty"`
	Evidence   []Evidence `json:"evidence"`
}

// Passed reports whether every check passed.
func (r *ProofResult) Passed() bool {
	for _, e := range r.Evidence {
		if !e.Passed {
			return false
		}
	}
	return len(r.Evidence) > 0
}

// Evidence records what proved (or disproved) one check: its name, result
// and reason, when, on which generation and sandbox, and who ran it.
type Evidence struct {
	Check      string    `json:"check"`
	Passed     bool      `json:"passed"`
	Reason     string    `json:"reason"`
	Generation string    `json:"generation"`
	SandboxID  string    `json:"sandboxId,omitempty"`
	Started    time.Time `json:"started"`
	Finished   time.Time `json:"finished"`
	By         string    `json:"by"`
}

// StopResult is POST /v1/pools/{pool}/generations/{generation}/stop: the
// claims of the generation that were still open and are now ended.
type StopResult struct {
	Stopped []string `json:"stopped"`
}

// RunnerIdentity is what a sandbox's runner says about itself (the
// runner protocol's identity answer, relayed).
type RunnerIdentity struct {
	// RunnerBinarySHA256 is "sha256:<hex>" of the runner's own executable, read
	// through /proc/self/exe when it started: the binary's hash, not the
	// digest of the runner image that ships it.
	RunnerBinarySHA256 string `json:"runnerBinarySha256"`
	// LegacyRunnerDigest is the same hash under the name runners before
	// runnerBinarySha256 used; a runner sends both, and the client reads it
	// only when runnerBinarySha256 is absent.
	LegacyRunnerDigest string `json:"runnerDigest,omitempty"`
	// Generation and SandboxID are the ones the runner was started for.
	Generation string `json:"generation"`
	SandboxID  string `json:"sandboxId"`
	// ProtocolVersion and MinProtocolVersion are the range it speaks.
	ProtocolVersion    int `json:"protocolVersion"`
	MinProtocolVersion int `json:"minProtocolVersion"`
	// Pid is the runner's pid inside the sandbox; Started when it started.
	Pid     int       `json:"pid"`
	Started time.Time `json:"started"`
}

// ReadyPart is one part a readiness check found at fault.
type ReadyPart struct {
	Part   string `json:"part"`   // e.g. "database", "config repository", "backend"
	Reason string `json:"reason"` // what is wrong, with an error id; the detail is in the server's log
}

// Readiness is GET /readyz's answer (200 ready, 503 not): whether the
// server can take work, and the parts at fault when it cannot.
type Readiness struct {
	Ready   bool        `json:"ready"`
	Failing []ReadyPart `json:"failing,omitempty"`
}
