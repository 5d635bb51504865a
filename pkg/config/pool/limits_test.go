package pool_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/config/pool"
)

func TestPoolLimits(t *testing.T) {
	good, _ := pool.Marshal(pool.Default("agents"))
	in := strings.Replace(string(good), "warmSize: 2", "warmSize: 2\n  limits: {cpu: \"0.5\", memory: 256Mi, pids: 128, openFiles: 1024, workspace: 512Mi}\n  acceptUnenforced: [cpu]", 1)
	p, err := pool.ParsePool([]byte(in), "pool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Spec.Limits.Bounds()
	if err != nil {
		t.Fatal(err)
	}
	want := pool.Bounds{CPUMillis: 500, MemoryBytes: 256 << 20, Pids: 128, OpenFiles: 1024, WorkspaceBytes: 512 << 20}
	if b != want || !slices.Equal(p.Spec.AcceptUnenforced, []string{"cpu"}) || !slices.Equal(b.Set(), pool.LimitNames) {
		t.Errorf("bounds %+v, accept %v, set %v", b, p.Spec.AcceptUnenforced, b.Set())
	}
	again, _ := pool.Marshal(p)
	if p2, err := pool.ParsePool(again, "pool.yaml"); err != nil || p2.Spec.Limits != p.Spec.Limits {
		t.Fatalf("round trip: %v\n%s", err, again)
	}
}

func TestPoolLimitRefusals(t *testing.T) {
	good, _ := pool.Marshal(pool.Default("agents"))
	for name, tc := range map[string]struct{ add, msg string }{
		"cpu words":      {"limits: {cpu: lots}", `pool.yaml:11: spec.limits.cpu: invalid pool document: "lots" is not a CPU amount`},
		"cpu tiny":       {"limits: {cpu: 1m}", `spec.limits.cpu: invalid pool document: "1m" is outside`},
		"memory unit":    {"limits: {memory: 256MB}", `spec.limits.memory: invalid pool document: "256MB" is not a size`},
		"memory tiny":    {"limits: {memory: 1Ki}", "under the 4Mi"},
		"pids negative":  {"limits: {pids: -1}", "spec.limits.pids: invalid pool document: -1 is negative"},
		"workspace zero": {"limits: {workspace: \"0\"}", "spec.limits.workspace"},
		"unknown limit":  {"acceptUnenforced: [cpu, disk]", `pool.yaml:11: spec.acceptUnenforced[1]: invalid pool document: unknown limit "disk"`},
		"unknown field":  {"limits: {swap: 1Gi}", "unknown field \"swap\""},
	} {
		t.Run(name, func(t *testing.T) {
			in := strings.Replace(string(good), "warmSize: 2", "warmSize: 2\n  "+tc.add, 1)
			_, err := pool.ParsePool([]byte(in), "pool.yaml")
			if !errors.Is(err, pool.ErrInvalid) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v\n%s", err, in)
			}
		})
	}
}

func TestParseSizeAndCPU(t *testing.T) {
	for in, want := range map[string]uint64{"1": 1, "1Ki": 1024, "2Mi": 2 << 20, "1G": 1e9, "3k": 3000} {
		if got, err := pool.ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]uint64{"0.5": 500, "2": 2000, "250m": 250, "1.25": 1250} {
		if got, err := pool.ParseCPU(in); err != nil || got != want {
			t.Errorf("ParseCPU(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5Mi", "Mi", "99999999999999999999Ti"} {
		if _, err := pool.ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}
