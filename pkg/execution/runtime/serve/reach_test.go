package serve_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/pkg/release"
	"github.com/slipway-dev/slipway/testharness/need"
	"github.com/slipway-dev/slipway/testharness/registrytest"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

// A state directory under a folder only root may enter (as mktemp -d
// makes one) cannot hold the sandboxes of a template that runs as uid
// 1000: Serve refuses to start, naming the folder, its mode and what to
// do, instead of failing every sandbox with bwrap's "Permission denied".
func TestServeRefusesStateOutOfReach(t *testing.T) {
	need.Root(t, "a sandbox runs as its template's user (uid 1000) only when the runtime is root; otherwise it runs as the caller")
	w := runtimetest.New(t, registrytest.NewInProcess(t))
	ctx := context.Background()
	repo := filepath.Join(t.TempDir(), "config.git")
	if err := gitops.InitBare(repo, "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := release.InitConfig(ctx, repo, "main", "agents", nil, gitops.Signature{}); err != nil {
		t.Fatal(err)
	}
	g := w.Generation(t, "agents", nil, w.TemplateAsUser(t, "1000:1000"))
	if _, err := release.Promote(ctx, release.Promotion{Repo: repo, Generation: g, Activate: true, SkipVerify: true}); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	for p := base; p != "/tmp" && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	private := filepath.Join(base, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}

	var log serveLog
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() {
		served <- serve.Run(sctx, serve.Config{Repo: repo, State: filepath.Join(private, "state"), Listen: "127.0.0.1:0", Token: apiToken,
			Log: &log, Verify: runtime.Verify{Skip: true}}, func(string) { stop() })
	}()
	var err error
	select {
	case err = <-served:
	case <-time.After(60 * time.Second):
		t.Fatalf("Serve did not end:\n%s", log.String())
	}
	if err == nil {
		t.Fatalf("Serve started and served on a state directory its sandboxes cannot reach:\n%s", log.String())
	}
	for _, want := range []string{"generation " + g.ID, private + " is mode 0700", "uid 1000", "chmod o+x " + private} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
