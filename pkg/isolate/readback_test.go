package isolate_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/slipway-dev/slipway/pkg/isolate"
)

// A cgroup's limits read back from the kernel as they were set, and a
// limit lifted on the host behind its back reads back as none.
func TestCgroupLimitsReadBack(t *testing.T) {
	c := requireCgroups(t, isolate.ControllerCPU, isolate.ControllerMemory, isolate.ControllerPids)
	want := isolate.CgroupLimits{CPUMillis: 1500, MemoryBytes: 48 << 20, Pids: 33}
	g := newCgroup(t, c, want)
	got, err := g.Applied()
	if err != nil || got != want {
		t.Fatalf("read back %+v, %v; want %+v", got, err, want)
	}
	proved, why := c.ProbeCgroups("t-probe-" + strconv.Itoa(os.Getpid()))
	if len(proved) != 3 || len(why) != 0 {
		t.Fatalf("probe proved %v, why %v", proved, why)
	}
}

// hasCapSysResource reports whether this process may raise a hard rlimit.
func hasCapSysResource(t *testing.T) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			var caps uint64
			for _, c := range strings.TrimSpace(v) {
				caps = caps<<4 | uint64(strings.IndexRune("0123456789abcdef", c))
			}
			return caps&(1<<unix.CAP_SYS_RESOURCE) != 0
		}
	}
	t.Fatal("no CapEff in /proc/self/status")
	return false
}

// A process may lower its own RLIMIT_NOFILE, and the kernel reads that
// back; raising it past the hard limit is refused without
// CAP_SYS_RESOURCE (as for root on this project's hosts and in Docker's
// default capabilities), which is why the most a sandbox can get is the
// runtime's hard limit.
func TestProbeLowerNoFile(t *testing.T) {
	hard, err := isolate.NoFileHardLimit()
	if err != nil || hard == 0 {
		t.Fatalf("hard limit %d, %v", hard, err)
	}
	if err := isolate.ProbeLowerNoFile(context.Background(), 64); err != nil {
		t.Fatal(err)
	}
	err = isolate.ProbeLowerNoFile(context.Background(), hard+1)
	if hasCapSysResource(t) {
		if err != nil {
			t.Fatalf("with CAP_SYS_RESOURCE, raising to %d: %v", hard+1, err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "could not lower its RLIMIT_NOFILE") {
		t.Fatalf("raising past the hard limit %d without CAP_SYS_RESOURCE: %v", hard, err)
	}
}
