package cli

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/console"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
	"github.com/slipway-dev/slipway/testharness/need"
)

// TestConsoleRolloutLive opens a rollout's page in a real browser while
// the rollout runs (a real runtime warming, proving and draining) and
// watches its timeline change on the open page, without a reload, until
// it succeeds.
func TestConsoleRolloutLive(t *testing.T) {
	need.Binary(t, "chromium", "apt-get install chromium")
	w := newControlWorld(t)
	ctx := context.Background()
	db := "sqlite:" + filepath.Join(w.dir, "control.db")
	r := run(t, "", "tenant", "token", "create", "ops", "--scope", "operator", "--db", db)
	if r.code != 0 {
		t.Fatalf("operator token: %+v", r)
	}
	opsTok := strings.TrimSpace(r.stdout)
	cp := w.startControl(t, db)

	var list struct {
		Generations []struct {
			ID   string
			Pins []struct{ Kind, Artifact string }
		}
	}
	r = run(t, "", "generation", "list", "--repo", w.repo, "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Generations) != 1 {
		t.Fatalf("generation list: %v %+v", err, r)
	}
	id1 := list.Generations[0].ID
	host := ""
	for _, pin := range list.Generations[0].Pins {
		if pin.Kind == "controlPlane" {
			host, _, _ = strings.Cut(pin.Artifact, "/")
		}
	}
	g1 := filepath.Join(w.dir, "g1.yaml")
	if r = run(t, "", "generation", "show", id1, "--repo", w.repo); r.code != 0 {
		t.Fatal(r)
	}
	os.WriteFile(g1, []byte(r.stdout), 0o644)
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	g2 := filepath.Join(w.dir, "g2.yaml")
	if r = run(t, "", "generation", "create", "--pool", "agents", "--insecure-skip-verify", "--from", g1, "--pin", "controlPlane="+push(t, host+"/platform/cp:v2", img), "--out-file", g2); r.code != 0 {
		t.Fatal(r)
	}
	id2 := strings.TrimSpace(r.stdout)
	if r = run(t, "", "promote", "--repo", w.repo, "--pool", "agents", "--generation", g2, "--insecure-skip-verify"); r.code != 0 {
		t.Fatal(r)
	}

	repo, err := gitops.Open(ctx, w.repo, gitops.WithDepth(0))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := console.New(cp.url, console.WithRuntime("local", w.rt.base, restartToken), console.WithConfigRepo(repo, "main"))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ops := newBrowser(t, hs.URL, opsTok, artifacts(t))

	done := make(chan result, 1)
	go func() {
		done <- run(t, "", "rollout", "start", "--repo", w.repo, "--pool", "agents", "--to", id2, "--runtime", w.rt.base, "--token-file", w.rtTokenFile,
			"--unsigned-evidence", "--wait", "--poll", "500ms")
	}()
	var rec *rollout.Record
	poll(t, 60*time.Second, "the rollout's first commit", func() (bool, string) {
		rec, err = rollout.ReadRecord(ctx, repo, "main", "agents", "")
		return err == nil, ""
	})
	if rec.Outcome != "running" {
		t.Fatalf("the rollout ended (%s) before the page opened: nothing live to watch", rec.Outcome)
	}
	ops.run("rollout page", chromedp.Navigate(hs.URL+"/pools/agents/rollouts/"+rec.ID), chromedp.WaitVisible(chromedp.ID("timeline")))
	first := eval[string](ops, "first timeline", `Array.from(document.querySelectorAll("#timeline li")).map(l => l.dataset.result).join(",")`)
	ops.shot("rollout-running")
	// Mark the document: a reload would lose the mark.
	eval[bool](ops, "mark", `(document.body.dataset.mark = "kept", true)`)
	ops.run("the rollout succeeds on the open page", chromedp.WaitVisible(chromedp.Search(`//span[@id="outcome"][contains(., "succeeded")]`)))
	last := eval[string](ops, "last timeline", `Array.from(document.querySelectorAll("#timeline li")).map(l => l.dataset.result).join(",")`)
	if mark := eval[string](ops, "mark", `document.body.dataset.mark || ""`); mark != "kept" {
		t.Fatal("the page was reloaded: the timeline did not update in place")
	}
	if first == last || !strings.HasPrefix(last, "passed,passed,passed,passed,passed,passed") {
		t.Fatalf("timeline: %q when the page opened, %q at the end", first, last)
	}
	t.Logf("timeline on the open page: %q, then %q", first, last)
	ops.shot("rollout-succeeded")
	if res := <-done; res.code != 0 {
		t.Fatalf("rollout start: %+v", res)
	}
	ops.run("pool page", chromedp.Navigate(hs.URL+"/pools/agents"), chromedp.WaitVisible(chromedp.ID("generations")))
	ops.shot("pool-after-rollout")
	ops.run("diff", chromedp.Navigate(hs.URL+"/pools/agents/diff?a="+id1+"&b="+id2), chromedp.WaitVisible(chromedp.CSS("table")))
	// only the control plane's pin changed
	if s := ops.text("table"); !strings.Contains(s, "controlPlane") || strings.Count(s, "sha256:") != 2 || strings.Contains(s, "runner") {
		t.Errorf("diff: %q", s)
	}
	ops.shot("generation-diff")
}
