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
	// Unavailable says why a limit is missing from Enforced, if one is.
	Unavailable string `json:"unavailable,omitempty"`
}

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
