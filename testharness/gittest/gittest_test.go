package gittest_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/testharness/gittest"
)

func TestCloneAndPushOverHTTP(t *testing.T) {
	s := gittest.NewServer(t)
	url := s.Seed(t, "config.git", "main", map[string]string{"pools/a/pool.yaml": "kind: Pool\n"})
	work := filepath.Join(t.TempDir(), "w")
	gittest.Git(t, "", "clone", "--quiet", url, work)
	if got := gittest.Git(t, work, "show", "HEAD:pools/a/pool.yaml"); got != "kind: Pool" {
		t.Fatalf("cloned content %q", got)
	}
	gittest.Git(t, work, "commit", "--quiet", "--allow-empty", "-m", "second")
	gittest.Git(t, work, "push", "--quiet", "origin", "main")
	if s.Pushes() != 1 {
		t.Errorf("pushes = %d, want 1", s.Pushes())
	}
	if got := gittest.Git(t, s.Dir("config.git"), "log", "--format=%s", "main"); got != "second\nseed" {
		t.Errorf("log = %q", got)
	}

	s.ReadOnly("config.git", true)
	gittest.Git(t, work, "commit", "--quiet", "--allow-empty", "-m", "third")
	if _, err := gittest.Run(work, "push", "--quiet", "origin", "main"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("push to a read-only repo: %v, want a 403", err)
	}
}
