package runtime_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/testharness/need"
)

// A sandbox that cannot be created is logged with its reason: here the
// issue's case, a template that runs as uid 1000 and a state directory
// under a parent only root may enter (t.TempDir's are 0700).
func TestFailedCreateLogged(t *testing.T) {
	need.Root(t, "a sandbox runs as its template's user (uid 1000) only when the runtime is root; otherwise it runs as the caller")
	w := newWarmWorld(t)
	ctx := context.Background()
	g := w.Generation(t, "agents", nil, w.TemplateAsUser(t, "1000:1000"))
	var log bytes.Buffer
	warm := runtime.NewWarm(newLocalBackend(t), runtime.NewRegistryArtifacts(t.TempDir()), runtime.WithWarmLog(&log))
	d := w.desired(t, "rev-1", 1, g)
	if rep := warm.Reconcile(ctx, d); len(rep.Errors) != 1 {
		t.Fatalf("reconcile: %+v, want one failed create", rep)
	}
	if _, _, err := warm.Claim(ctx, d, "agents", "r-cold"); err == nil {
		t.Fatal("a cold start succeeded")
	}
	got := log.String()
	for _, want := range []string{
		"sandbox create failed: pool agents, generation " + g.ID + ", for warm: ",
		"sandbox create failed: pool agents, generation " + g.ID + ", for r-cold: ",
		"is mode 0700", "uid 1000",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log does not say %q:\n%s", want, got)
		}
	}
}

// Every failed sync of the config repository is logged with its reason and
// the revision still served; a sync that succeeds again says so.
func TestFailedSyncLogged(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.promote(true, nil)
	repo, err := gitops.Open(ctx, f.url)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	s := runtime.NewSyncer(repo, "main", runtime.Verify{}, time.Hour, runtime.WithSyncLog(&log))
	d, err := s.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if log.Len() != 0 {
		t.Errorf("a good sync logged: %s", log.String())
	}
	dir := f.git.Dir("config.git")
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err = s.Sync(ctx); err == nil {
			t.Fatal("a sync of a repository that is gone succeeded")
		}
	}
	if err := os.Rename(dir+".away", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// the same failure twice is one line
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log: %q, want one line for the same failure twice, and a recovery", lines)
	}
	if l := lines[0]; !strings.Contains(l, " ERROR config sync failed (branch main): ") || !strings.Contains(l, "still serving revision "+d.Revision[:12]) {
		t.Errorf("failure line: %s", l)
	}
	if !strings.Contains(lines[1], " INFO  config sync of branch main succeeded again at revision "+d.Revision[:12]+" after 2 failed") {
		t.Errorf("recovery line: %s", lines[1])
	}
}
