package sandbox

import (
	"context"
	"syscall"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// Limit names, as pool.yaml's spec.limits spells them.
const (
	LimitCPU       = "cpu"
	LimitMemory    = "memory"
	LimitPids      = "pids"
	LimitOpenFiles = "openFiles"
	LimitWorkspace = "workspace"
)

// Enforcement says which limits a backend enforces on this host, and how.
// It is what GET /v1/info and each run manifest report.
type Enforcement struct {
	// Cgroup is "v2", "v1" or "none": the cgroup tree the backend puts
	// each sandbox in.
	Cgroup string `json:"cgroup"`
	// Enforced lists the limit names (LimitCPU, ...) the backend can
	// enforce here; How says with what, by name.
	Enforced []string          `json:"enforced"`
	How      map[string]string `json:"how,omitempty"`
	// Max is the largest value of a limit this host can apply, where
	// there is one (openFiles: the runtime's own hard RLIMIT_NOFILE, since
	// raising it needs CAP_SYS_RESOURCE).
	Max map[string]uint64 `json:"max,omitempty"`
	// Unavailable says why a limit is missing from Enforced, if one is.
	Unavailable string `json:"unavailable,omitempty"`
	// WorkspaceInMemory says the workspace is a tmpfs whose pages count
	// against the memory limit: a pool with both may then ask for a
	// workspace of at most half its memory (MaxWorkspace), so that with
	// the workspace, /tmp and /dev/shm full the runner and the workload
	// still have a quarter of it.
	WorkspaceInMemory bool `json:"workspaceInMemory,omitempty"`
}

// MaxWorkspace is the largest workspace a sandbox with memory limit
// memory may have where Enforcement.WorkspaceInMemory (0: no memory
// limit, no bound).
func MaxWorkspace(memory uint64) uint64 { return memory / 2 }

// Applied are the limits a sandbox has now, read back from the kernel,
// by limit name (LimitCPU in thousandths of a core, LimitMemory and
// LimitWorkspace in bytes, LimitPids, LimitOpenFiles, and LimitTmp, the
// size of its /tmp); a limit the kernel does not hold is absent. How says
// where each was read.
type Applied struct {
	Values map[string]uint64 `json:"values"`
	How    map[string]string `json:"how,omitempty"`
}

// DefaultTmpBytes is the size of /tmp (and /dev/shm) in a sandbox whose
// pool sets neither a memory nor a workspace limit.
const DefaultTmpBytes = 256 << 20

// CredentialTmpBytes is the size of a sandbox's credential tmpfs
// (CredentialDir): tokens, not data.
const CredentialTmpBytes = 1 << 20

// TmpBytes is the size of the tmpfs at /tmp (and of the one at /dev/shm)
// of a sandbox with limits l. Its pages are memory and count against the
// memory limit: with one, each is an eighth of it (with a workspace of at
// most MaxWorkspace, all three full leave the runner and the workload a
// quarter); without one, the workspace's size; with neither,
// DefaultTmpBytes. Rounded down to whole pages, at least one.
func TmpBytes(l Limits) uint64 {
	n := uint64(DefaultTmpBytes)
	switch {
	case l.MemoryBytes > 0:
		n = l.MemoryBytes / 8
	case l.WorkspaceBytes > 0:
		n = l.WorkspaceBytes
	}
	return max(n&^4095, 4096)
}

// LimitTmp names the size of a sandbox's /tmp in Applied (not a pool
// setting: it follows from the pool's memory or workspace limit).
const LimitTmp = "tmp"

// LimitEvents count what a sandbox's limits did since it started.
type LimitEvents struct {
	OOMKills     uint64 `json:"oomKills,omitempty"`     // processes killed at the memory limit
	PidsRefused  uint64 `json:"pidsRefused,omitempty"`  // forks refused at the pids limit
	CPUThrottled uint64 `json:"cpuThrottled,omitempty"` // CPU periods the quota held the sandbox back
	// WorkspaceFull says the workspace has no space left now.
	WorkspaceFull bool `json:"workspaceFull,omitempty"`
}

// Bounded is a Backend that enforces aggregate limits (Limits.CPUMillis,
// MemoryBytes, Pids, WorkspaceBytes) and can say what they did.
type Bounded interface {
	Enforcement() Enforcement
	// LimitEvents reads the counters of sandbox id.
	LimitEvents(ctx context.Context, id string) (LimitEvents, error)
	// Applied reads back the limits sandbox id has from the kernel.
	Applied(ctx context.Context, id string) (Applied, error)
}

// Outcomes: which limit ended a command's work.
const (
	OutcomeOOMKilled       = "oom_killed"
	OutcomePidsExhausted   = "pids_exhausted"
	OutcomeDiskFull        = "disk_full"
	OutcomeCPUTimeExceeded = "cpu_time_exceeded"
)

// Outcome names the limit that ended a command's work, from the
// sandbox's counters before and after it ran and its exit status; "" when
// no limit did. An OOM kill or a refused fork while the command ran counts
// whatever the command's exit status (its processes, not the command
// itself, may have been the ones to fail); a full workspace counts only
// when the command failed.
func Outcome(before, after LimitEvents, st *runner.ExitStatus) string {
	failed := st != nil && (st.ExitCode != 0 || st.Signal != "")
	switch {
	case after.OOMKills > before.OOMKills:
		return OutcomeOOMKilled
	case after.PidsRefused > before.PidsRefused:
		return OutcomePidsExhausted
	case st != nil && (st.Signal == syscall.SIGXCPU.String() || st.ExitCode == 128+int(syscall.SIGXCPU)):
		return OutcomeCPUTimeExceeded
	case failed && after.WorkspaceFull:
		return OutcomeDiskFull
	}
	return ""
}
