package isolate_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/isolate"
	"github.com/slipway-dev/slipway/testharness/need"
)

// A frozen process makes no progress; a thawed one does; a child it forks
// while frozen-in-the-making is frozen with it (it is born in the cgroup).
func TestFreezerStopsAndResumes(t *testing.T) {
	need.Root(t, "the cgroup v1 freezer")
	f := isolate.DetectFreezer("slipway-test")
	need.Err(t, f.Available())
	counter := filepath.Join(t.TempDir(), "n")
	cmd := exec.Command("sh", "-c", `i=0; while :; do i=$((i+1)); echo $i > "$1"; done`, "sh", counter)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	id := "t" + strings.ReplaceAll(t.Name(), "/", "-")
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = f.Thaw(id)
		_, _ = cmd.Process.Wait()
		if err := f.Remove(id); err != nil {
			t.Error(err)
		}
	})
	read := func() string { b, _ := os.ReadFile(counter); return string(b) }
	for read() == "" {
		time.Sleep(time.Millisecond)
	}
	thaw, err := f.Freeze(context.Background(), id, func() ([]int, error) { return []int{cmd.Process.Pid}, nil })
	if err != nil {
		t.Fatal(err)
	}
	if s, err := f.State(id); err != nil || s != "FROZEN" {
		t.Fatalf("state %q %v", s, err)
	}
	before := read()
	time.Sleep(200 * time.Millisecond)
	if after := read(); after != before {
		t.Fatalf("frozen process went on counting: %q then %q", before, after)
	}
	if err := thaw(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for read() == before {
		if time.Now().After(deadline) {
			t.Fatal("thawed process does not count")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestFreezerRefusesWithoutHierarchy(t *testing.T) {
	f := isolate.DetectFreezer("bad/name")
	if err := f.Available(); err == nil || !strings.Contains(err.Error(), `bad cgroup name "bad/name"`) {
		t.Fatalf("err %v", err)
	}
	if _, err := f.Freeze(context.Background(), "x", nil); err == nil {
		t.Fatal("froze without a hierarchy")
	}
}
