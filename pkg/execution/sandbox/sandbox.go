package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/isolate/shape"
)

// Backend creates, finds and deletes sandboxes on one medium (the local
// host with bubblewrap: package local; Kubernetes with agent-sandbox:
// package kubesandbox). Its methods are safe for concurrent use.
type Backend interface {
	// Create makes a sandbox from spec and returns it once its runner has
	// proved its identity (the expected runner digest, generation and
	// sandbox id). On error nothing of the sandbox is left.
	Create(ctx context.Context, spec Spec) (*Sandbox, error)
	// List returns the sandboxes the backend's durable state knows, dead
	// ones included (State says which), that match filter, oldest first.
	List(ctx context.Context, filter Filter) ([]*Sandbox, error)
	// SetOwner hands a running sandbox from owner from to owner to (a warm
	// sandbox to a claim) in the backend's state, for as long as the
	// sandbox can outlive a crash there (the local backend's sandboxes die
	// with it, so it does not flush the change); ErrOwnerConflict when its
	// owner is not from, so two claims cannot take the same sandbox.
	SetOwner(ctx context.Context, id, from, to string) (*Sandbox, error)
	// Delete kills the sandbox and everything in it and removes its state
	// and workspace. Deleting a sandbox that does not exist (any more) does
	// nothing: Delete is repeat-safe.
	Delete(ctx context.Context, id string) error
	// Health reports whether the backend can create sandboxes now.
	Health(ctx context.Context) error
}

// Spec is what a sandbox is made from.
type Spec struct {
	// Pool, Generation and Owner are recorded with the sandbox and come back
	// from List after a restart. Owner is who holds it: OwnerWarm or a
	// claim id. Generation is also what the runner proves it was started
	// for.
	Pool       string
	Generation string
	Owner      string
	// Template is the workspace-template image, already verified by the
	// caller. TemplateID is its manifest digest from the generation's pin;
	// the backend refuses an image whose digest differs.
	Template   v1.Image
	TemplateID string
	// Runner is the runner binary on the host (see UnpackRunner).
	Runner RunnerBinary
	// Network is the sandbox's network: NetworkDeny (or empty), or
	// NetworkAllowList with Allow.
	Network Network
	// Allow lists what a NetworkAllowList sandbox may reach: "host:port",
	// "CIDR:port" or "*.domain:port" (pool.yaml's spec.network.allow).
	Allow []string
	// Limits bound every process in the sandbox.
	Limits Limits
	// Shape names the settings the sandbox is made for (a hash of its
	// pool's limits, network and whatever else shapes it, computed by the
	// caller): the backend records it, and a warm member whose Shape is not
	// its pool's current one is never handed out.
	Shape string
	// Env is added over the template's environment for the runner and
	// every command it runs.
	Env map[string]string
	// Proof marks the sandbox of a rollout's proof claim: a backend that
	// records claims outside the runtime (ClusterPools) labels it so, so
	// that it never counts as traffic.
	Proof bool
}

// ClusterPools is a Backend whose warm pools the cluster keeps, not the
// runtime (Kubernetes: agent-sandbox's SandboxWarmPool, rendered per
// generation). With such a backend the runtime never creates warm members:
// a claim is a Create with the claim as owner on the pool's active
// generation (the cluster hands it a warm member, or cold-starts one), a
// proof claim a Create with Proof set on the warming generation, List
// shows claimed sandboxes only, and pool status counts warm members with
// WarmCounts.
type ClusterPools interface {
	Backend
	// WarmCounts returns the warm members of each generation of pool as
	// the cluster counts them, by generation id.
	WarmCounts(ctx context.Context, pool string) (map[string]WarmCount, error)
}

// WarmCount is one generation's warm pool as its cluster counts it.
type WarmCount struct {
	// Replicas is the size asked for; Ready the members ready to be
	// claimed; the others are Warming.
	Replicas, Ready, Warming int
}

// Placement is where a sandbox runs, as its backend's objects say, for the
// run manifest; nil where the backend records none (the local backend:
// this host).
type Placement struct {
	Cluster      string `json:"cluster,omitempty"`
	Namespace    string `json:"namespace,omitempty"`
	NodeID       string `json:"nodeId,omitempty"`
	NodeImageID  string `json:"nodeImageId,omitempty"`
	RuntimeClass string `json:"runtimeClass,omitempty"`
	// LaunchType is LaunchWarm, LaunchCold or LaunchNewNode.
	LaunchType string `json:"launchType,omitempty"`
}

// Launch types of a claimed sandbox.
const (
	// LaunchWarm: a warm member, ready before the claim.
	LaunchWarm = "warm"
	// LaunchCold: started for the claim on a node that was already there.
	LaunchCold = "cold"
	// LaunchNewNode: started for the claim on a node that joined the
	// cluster after the claim was made.
	LaunchNewNode = "new-node"
)

// OwnerWarm is the owner of a sandbox waiting in a warm pool.
const OwnerWarm = "warm"

// Network says what a sandbox may reach.
type Network string

// Networks.
const (
	// NetworkDeny is a network namespace of the sandbox's own with only
	// loopback.
	NetworkDeny Network = "deny"
	// NetworkAllowList is NetworkDeny plus an HTTP proxy (CONNECT and plain
	// HTTP) at EgressProxyAddr inside the sandbox, named by HTTP_PROXY and
	// HTTPS_PROXY, that reaches Spec.Allow's destinations only and records
	// every attempt (a backend that implements it says how it gives them).
	NetworkAllowList Network = "allow-list"
)

// EgressProxyAddr is where an allow-list sandbox finds its egress proxy:
// in the sandbox's own network namespace, so no other sandbox shares it.
const EgressProxyAddr = "127.0.0.1:3128"

// Limits bound a sandbox. The first five are per-process resource limits
// (setrlimit) for everything in it; NProc counts processes of the
// sandbox's uid across the whole host. The others are aggregate over the
// sandbox (see Bounded): CPU in thousandths of a core, memory in bytes,
// processes and threads alive at once, and the workspace's size in bytes.
// Zero leaves a limit unset. A backend refuses (ErrInvalidSpec) a limit
// it cannot enforce: it never drops one silently.
type Limits struct {
	NoFile       uint64 `json:"noFile,omitempty"`
	NProc        uint64 `json:"nproc,omitempty"`
	AddressSpace uint64 `json:"addressSpace,omitempty"`
	CPUSeconds   uint64 `json:"cpuSeconds,omitempty"`
	FileSize     uint64 `json:"fileSize,omitempty"`

	CPUMillis      uint64 `json:"cpuMillis,omitempty"`
	MemoryBytes    uint64 `json:"memoryBytes,omitempty"`
	Pids           uint64 `json:"pids,omitempty"`
	WorkspaceBytes uint64 `json:"workspaceBytes,omitempty"`
}

// RunnerBinary is a runner executable on the host and its identity.
type RunnerBinary struct {
	// Path is the file; the backend copies it and checks its digest.
	Path string `json:"path"`
	// Digest is "sha256:<hex>" of the file, as the runner image's
	// LabelRunnerSHA256 records it.
	Digest string `json:"digest"`
	// Protocol is the runner protocol version from the image's
	// LabelRunnerProtocol (0 when unknown).
	Protocol int `json:"protocol,omitempty"`
}

// Filter selects sandboxes; empty fields match everything.
type Filter struct {
	Pool       string
	Generation string
	Owner      string
	State      State
}

// Match reports whether s passes the filter.
func (f Filter) Match(s *Sandbox) bool {
	return (f.Pool == "" || f.Pool == s.Pool) &&
		(f.Generation == "" || f.Generation == s.Generation) &&
		(f.Owner == "" || f.Owner == s.Owner) &&
		(f.State == "" || f.State == s.State)
}

// State is where a sandbox is in its life.
type State string

// States.
const (
	// StateStarting: its process runs but its runner has not proved its
	// identity yet (Create has not returned).
	StateStarting State = "starting"
	// StateRunning: it runs and its runner proved its identity.
	StateRunning State = "running"
	// StateDead: its process is gone (it crashed, was killed, or died with
	// the process that ran it). Only Delete is left to do.
	StateDead State = "dead"
)

// Sandbox is one sandbox as its backend's durable state records it, and a
// way to talk to its runner.
type Sandbox struct {
	ID                 string    `json:"id"`
	Pool               string    `json:"pool"`
	Generation         string    `json:"generation"`
	Owner              string    `json:"owner"`
	TemplateID         string    `json:"templateId"`
	RunnerBinarySHA256 string    `json:"runnerBinarySha256"`
	State              State     `json:"state"`
	Created            time.Time `json:"created"`
	// Ready is when the runner proved its identity; zero before.
	Ready time.Time `json:"ready,omitzero"`
	// Workdir is the workspace's path inside the sandbox.
	Workdir string `json:"workdir"`
	// RunnerPath is the runner binary's path inside the sandbox (for the
	// probes proofs run with it); "" means RunnerPath.
	RunnerPath string `json:"runnerPath,omitempty"`
	// Placement is where it runs, when the backend says more than "this
	// host".
	Placement *Placement `json:"placement,omitempty"`
	// Refresh says what the refresh phase did at start.
	Refresh []RefreshResult `json:"refresh,omitempty"`
	// Network and Allow are the Spec's, as the backend recorded them
	// (empty where it records none): a warm member made for an older
	// network of its pool is not handed out.
	Network Network  `json:"network,omitempty"`
	Allow   []string `json:"allow,omitempty"`
	// Shape is the Spec's, as the backend recorded it ("" where it
	// records none, or for a sandbox made before shapes were recorded).
	Shape string `json:"shape,omitempty"`

	// Runner reaches the sandbox's runner; nil for a dead sandbox.
	Runner *runner.Client `json:"-"`
}

// RefreshResult is one per-clone value the refresh phase regenerated (or
// why it did not); package shape runs the phase.
type RefreshResult = shape.RefreshResult

// Identity asks the sandbox's runner who it is.
func (s *Sandbox) Identity(ctx context.Context) (*runner.Identity, error) {
	if s.Runner == nil {
		return nil, s.notRunning()
	}
	return s.Runner.Identity(ctx)
}

// Ping is a heartbeat to the sandbox's runner.
func (s *Sandbox) Ping(ctx context.Context) (*runner.Pong, error) {
	if s.Runner == nil {
		return nil, s.notRunning()
	}
	return s.Runner.Ping(ctx)
}

// Exec runs a command in the sandbox through its runner; see
// runner.Client.Exec.
func (s *Sandbox) Exec(ctx context.Context, req runner.ExecRequest, stdout, stderr io.Writer) (*runner.ExitStatus, error) {
	if s.Runner == nil {
		return nil, s.notRunning()
	}
	return s.Runner.Exec(ctx, req, stdout, stderr)
}

// RunnerBinaryPath is the runner's path inside the sandbox.
func (s *Sandbox) RunnerBinaryPath() string {
	if s.RunnerPath != "" {
		return s.RunnerPath
	}
	return RunnerPath
}

func (s *Sandbox) notRunning() error {
	return fmt.Errorf("%w: sandbox %s is %s", ErrNotRunning, s.ID, s.State)
}

// Error families: one errors.Is covers a class.
var (
	// ErrInvalidSpec: a Spec a backend refuses; the message names the field.
	ErrInvalidSpec = errors.New("sandbox: invalid spec")
	// ErrNotFound: no sandbox has that id.
	ErrNotFound = errors.New("sandbox: not found")
	// ErrNotRunning: the sandbox is dead or not ready.
	ErrNotRunning = errors.New("sandbox: not running")
	// ErrOwnerConflict: SetOwner found another owner than expected.
	ErrOwnerConflict = errors.New("sandbox: owner conflict")
	// ErrIdentity: a runner did not prove the identity expected of it (its
	// digest, generation or sandbox id), or a runner image's label does not
	// match its binary.
	ErrIdentity = errors.New("sandbox: runner identity mismatch")
	// ErrUnavailable: the backend cannot create sandboxes here.
	ErrUnavailable = errors.New("sandbox: backend unavailable")
	// ErrGenerationGone: the generation asked for has no capacity here
	// any more (on a cluster: its warm pool is gone, as after a rollout
	// drained it): whoever routed the claim to it has an old view.
	ErrGenerationGone = errors.New("sandbox: the generation's capacity is gone")
)

// Reap deletes every dead sandbox b knows (after a crash or restart of the
// process that ran them) and returns their ids. It is repeat-safe.
func Reap(ctx context.Context, b Backend) ([]string, error) {
	dead, err := b.List(ctx, Filter{State: StateDead})
	if err != nil {
		return nil, err
	}
	var ids []string
	var errs []error
	for _, s := range dead {
		if err := b.Delete(ctx, s.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		ids = append(ids, s.ID)
	}
	return ids, errors.Join(errs...)
}
