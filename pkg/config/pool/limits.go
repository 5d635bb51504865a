package pool

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Limit names, as pool.yaml spells them under spec.limits and in
// spec.acceptUnenforced.
const (
	LimitCPU       = "cpu"
	LimitMemory    = "memory"
	LimitPids      = "pids"
	LimitOpenFiles = "openFiles"
	LimitWorkspace = "workspace"
)

// LimitNames are every limit a pool can set, in pool.yaml's order.
var LimitNames = []string{LimitCPU, LimitMemory, LimitPids, LimitOpenFiles, LimitWorkspace}

// Limits bound each sandbox of the pool as a whole (not per process):
// CPU as a share of one core ("0.5", "500m", "2"), Memory and Workspace
// as byte sizes ("256Mi", "1Gi", "512M", "1048576"), Pids the processes
// and threads alive at once, OpenFiles per process. Empty or zero leaves
// a limit unset.
type Limits struct {
	CPU       string `yaml:"cpu,omitempty" json:"cpu,omitempty"`
	Memory    string `yaml:"memory,omitempty" json:"memory,omitempty"`
	Pids      int64  `yaml:"pids,omitempty" json:"pids,omitempty"`
	OpenFiles int64  `yaml:"openFiles,omitempty" json:"openFiles,omitempty"`
	Workspace string `yaml:"workspace,omitempty" json:"workspace,omitempty"`
}

// Bounds are Limits parsed: CPU in thousandths of a core, sizes in bytes;
// zero is unset.
type Bounds struct {
	CPUMillis      uint64 `json:"cpuMillis,omitempty"`
	MemoryBytes    uint64 `json:"memoryBytes,omitempty"`
	Pids           uint64 `json:"pids,omitempty"`
	OpenFiles      uint64 `json:"openFiles,omitempty"`
	WorkspaceBytes uint64 `json:"workspaceBytes,omitempty"`
}

// Set returns the names of the limits b sets, in LimitNames order.
func (b Bounds) Set() []string {
	var out []string
	for _, l := range []struct {
		name string
		v    uint64
	}{{LimitCPU, b.CPUMillis}, {LimitMemory, b.MemoryBytes}, {LimitPids, b.Pids}, {LimitOpenFiles, b.OpenFiles}, {LimitWorkspace, b.WorkspaceBytes}} {
		if l.v != 0 {
			out = append(out, l.name)
		}
	}
	return out
}

// Bounds parses l; the error names the field (spec.limits.<name>) at fault.
func (l Limits) Bounds() (Bounds, error) {
	var b Bounds
	var err error
	if l.CPU != "" {
		if b.CPUMillis, err = ParseCPU(l.CPU); err != nil {
			return b, fmt.Errorf("spec.limits.cpu: %w", err)
		}
	}
	if l.Memory != "" {
		if b.MemoryBytes, err = ParseSize(l.Memory); err != nil {
			return b, fmt.Errorf("spec.limits.memory: %w", err)
		}
		if b.MemoryBytes < 4<<20 {
			return b, fmt.Errorf("spec.limits.memory: %s is under the 4Mi a sandbox needs to start", l.Memory)
		}
	}
	if l.Pids < 0 {
		return b, fmt.Errorf("spec.limits.pids: %d is negative", l.Pids)
	}
	if l.OpenFiles < 0 {
		return b, fmt.Errorf("spec.limits.openFiles: %d is negative", l.OpenFiles)
	}
	if l.Pids > 0 && l.Pids < 8 {
		return b, fmt.Errorf("spec.limits.pids: %d is under the 8 a sandbox needs to start", l.Pids)
	}
	if l.OpenFiles > 0 && l.OpenFiles < 64 {
		return b, fmt.Errorf("spec.limits.openFiles: %d is under the 64 a sandbox needs to start", l.OpenFiles)
	}
	b.Pids, b.OpenFiles = uint64(l.Pids), uint64(l.OpenFiles)
	if l.Workspace != "" {
		if b.WorkspaceBytes, err = ParseSize(l.Workspace); err != nil {
			return b, fmt.Errorf("spec.limits.workspace: %w", err)
		}
	}
	return b, nil
}

// ParseCPU reads a CPU amount as Kubernetes writes it ("0.5", "2",
// "250m") into thousandths of a core; at least 10m.
func ParseCPU(s string) (uint64, error) {
	var m float64
	if v, ok := strings.CutSuffix(s, "m"); ok {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a CPU amount (like 0.5, 2 or 250m)", s)
		}
		m = float64(n)
	} else {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || strings.ContainsAny(s, "eExXpP_") {
			return 0, fmt.Errorf("%q is not a CPU amount (like 0.5, 2 or 250m)", s)
		}
		m = math.Round(f * 1000)
	}
	if m < 10 || m > 1<<20 {
		return 0, fmt.Errorf("%q is outside 10m to 1048 cores", s)
	}
	return uint64(m), nil
}

// sizeUnits are the suffixes ParseSize takes, longest first.
var sizeUnits = []struct {
	suffix string
	mult   uint64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

// ParseSize reads a byte size as Kubernetes writes it ("256Mi", "1G",
// "1048576"); it must be above 0.
func ParseSize(s string) (uint64, error) {
	num, mult := s, uint64(1)
	for _, u := range sizeUnits {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = v, u.mult
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n == 0 || n > math.MaxUint64/mult {
		return 0, fmt.Errorf("%q is not a size above 0 (like 256Mi, 1Gi or 1048576)", s)
	}
	return n * mult, nil
}

// validateLimits checks spec.limits and spec.acceptUnenforced.
func validateLimits(s *Spec) (field string, err error) {
	if _, err := s.Limits.Bounds(); err != nil {
		f, msg, _ := strings.Cut(err.Error(), ": ")
		return f, fmt.Errorf("%s", msg)
	}
	for i, n := range s.AcceptUnenforced {
		if !slices.Contains(LimitNames, n) {
			return fmt.Sprintf("spec.acceptUnenforced[%d]", i), fmt.Errorf("unknown limit %q (%s)", n, strings.Join(LimitNames, ", "))
		}
	}
	return "", nil
}
