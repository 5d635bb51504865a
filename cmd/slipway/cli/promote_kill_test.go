package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/testharness/gittest"
)

// TestPromoteKilledMidPush kills -9 a `slipway promote` process while the
// git server holds its push (before git sees it, and after git took it but
// before the answer), then promotes again: the generation lands exactly
// once and the repository is not corrupt.
func TestPromoteKilledMidPush(t *testing.T) {
	for _, when := range []string{"before", "after"} {
		t.Run(when, func(t *testing.T) { promoteKilled(t, when) })
	}
}

func promoteKilled(t *testing.T, when string) {
	_, host, digests := registryWith(t, "platform/cp:v1", "platform/runner:v1", "templates/tools:v1")
	dir := t.TempDir()
	img := func(rt string) string {
		repo, _, _ := strings.Cut(rt, ":")
		return host + "/" + repo + "@" + digests[rt]
	}
	gen := filepath.Join(dir, "g1.yaml")
	r := run(t, "", "generation", "create", "--pool", "agents", "--insecure-skip-verify", "--output", gen,
		"--pin", "controlPlane="+img("platform/cp:v1"), "--pin", "runner="+img("platform/runner:v1"),
		"--pin", "workspaceTemplate="+img("templates/tools:v1"), "--control-plane-protocol", "1", "--runner-protocol", "1")
	if r.code != 0 {
		t.Fatal(r)
	}
	id := strings.TrimSpace(r.stdout)

	srv := gittest.NewServer(t)
	url := srv.InitBare(t, "config.git", "main")
	held := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	hold := func() {
		once.Do(func() { close(held) })
		<-release
	}
	if when == "before" {
		// The push never reaches git (the connection died with the writer).
		srv.BeforeReceivePack(func() bool { hold(); return false })
	} else {
		srv.AfterReceivePack(hold)
	}

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "promote", "--repo", url, "--pool", "agents", "--generation", gen, "--insecure-skip-verify")
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the promote never pushed")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	close(release)
	srv.BeforeReceivePack(nil)
	srv.AfterReceivePack(nil)

	r = run(t, "", "promote", "--repo", url, "--pool", "agents", "--generation", gen, "--insecure-skip-verify")
	if r.code != 0 || !strings.Contains(r.stdout, id) {
		t.Fatalf("promote after the kill: %+v", r)
	}
	// Killed after git took the push: the second run finds it done.
	if want := map[string]string{"before": "committed ", "after": "unchanged "}[when]; !strings.HasPrefix(r.stdout, want) {
		t.Errorf("second run: %q, want it to start %q", r.stdout, want)
	}
	repo := srv.Dir("config.git")
	gittest.Git(t, repo, "fsck", "--strict")
	if n := gittest.Git(t, repo, "rev-list", "--count", "main"); n != "1" {
		t.Errorf("%s commits, want 1", n)
	}
	if got := gittest.Git(t, repo, "log", "--format=%(trailers:key=Slipway-Generation,valueonly)", "main"); strings.TrimSpace(got) != id {
		t.Errorf("log trailers %q, want %s once", got, id)
	}
}
