package local_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// A bounded workspace (a tmpfs in the sandbox's own mount namespace) is
// reached from the host for a checkpoint; a frozen sandbox makes no
// progress until thawed, and one deleted while frozen leaves nothing
// (frozen processes do not die of SIGKILL until thawed: Delete thaws).
func TestFreezeWorkspaceAndDeleteWhileFrozen(t *testing.T) {
	setup(t)
	b, s := bounded(t, sandbox.Limits{MemoryBytes: 64 << 20, WorkspaceBytes: 4 << 20})
	ctx := context.Background()
	if _, _, code := sh(t, s, "echo inside > note.txt; (i=0; while :; do i=$((i+1)); echo $i > /tmp/n; done) >/dev/null 2>&1 &"); code != 0 {
		t.Fatal("setup script failed")
	}
	ws, err := b.WorkspaceDir(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(ws, "note.txt")); err != nil || string(got) != "inside\n" {
		t.Fatalf("the workspace from the host: %q %v", got, err)
	}
	thaw, err := b.Freeze(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := b.FreezerState(s.ID); err != nil || st != "FROZEN" {
		t.Fatalf("state %q %v", st, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, perr := s.Ping(pctx)
	cancel()
	if perr == nil {
		t.Fatal("a frozen sandbox's runner answered")
	}
	if err := thaw(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ping(ctx); err != nil {
		t.Fatalf("the thawed runner does not answer: %v", err)
	}
	if err := b.ClearWorkspace(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 0 {
		t.Fatalf("cleared workspace holds %d entries", len(ents))
	}
	if _, err := b.Freeze(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Delete(ctx, s.ID) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Delete of a frozen sandbox hangs")
	}
	if st, _ := b.FreezerState(s.ID); st != "" {
		t.Errorf("freezer cgroup left, state %q", st)
	}
	if left := cgroupDirs(t, s.ID); len(left) != 0 {
		t.Errorf("cgroups left: %v", left)
	}
}
