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

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
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
	srv, err := console.New(cp.url, console.WithRuntime("local", w.rt.base, restartToken), console.WithConfigRepo(repo, "main"),
		console.WithConfigWriter(func(ctx context.Context) (*gitops.Repo, error) { return gitops.Open(ctx, w.repo) }, gitops.Signature{}),
		console.WithUnsignedEvidence())
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(func() { srv.Close() })
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

	// Roll the pool back from the console. Without a reason it is refused
	// and nothing is started.
	ops.run("pool page", chromedp.Navigate(hs.URL+"/pools/agents"), chromedp.WaitVisible(chromedp.ID("rollback")))
	noUnlabelled(t, ops)
	ops.run("rollback without a reason", chromedp.SetValue(chromedp.ID("rollback-to"), id1), chromedp.Click(chromedp.ID("rollback")),
		chromedp.WaitVisible(chromedp.CSS(`[role=alert]`)))
	if msg := ops.text(`[role=alert]`); !strings.Contains(msg, "a reason is required; nothing was done") {
		t.Fatalf("refusal: %q", msg)
	}
	ops.shot("rollback-refused-without-reason")
	if now, err := rollout.ReadRecord(ctx, repo, "main", "agents", ""); err != nil || now.ID != rec.ID {
		t.Fatalf("a refused rollback started a rollout: %+v %v", now, err)
	}
	// With a reason: the console starts it, drives it on the runtime, and
	// the page it lands on is the rollback's live timeline.
	ops.run("rollback with a reason", chromedp.Navigate(hs.URL+"/pools/agents"), chromedp.WaitVisible(chromedp.ID("rollback")),
		chromedp.SetValue(chromedp.ID("rollback-to"), id1), chromedp.SendKeys(chromedp.ID("rollback-reason"), "cp v2 leaks <memory>"),
		chromedp.Click(chromedp.ID("rollback")), chromedp.WaitVisible(chromedp.ID("timeline")))
	eval[bool](ops, "mark", `(document.body.dataset.mark = "kept", true)`)
	ops.run("the rollback succeeds on the open page", chromedp.WaitVisible(chromedp.Search(`//span[@id="outcome"][contains(., "succeeded")]`)))
	if mark := eval[string](ops, "mark", `document.body.dataset.mark || ""`); mark != "kept" {
		t.Fatal("the page was reloaded: the rollback's timeline did not update in place")
	}
	back, err := rollout.ReadRecord(ctx, repo, "main", "agents", "")
	if err != nil || back.ID == rec.ID || !back.Rollback || back.To != id1 || back.Outcome != "succeeded" || len(back.Actions) != 1 {
		t.Fatalf("the rollback's record: %+v %v", back, err)
	}
	if a := back.Actions[0]; a.Step != rollout.PhaseCompatibility || a.Actor != "ops/"+opsWho(t, cp.url, opsTok) || a.Reason != "cp v2 leaks <memory>" {
		t.Errorf("the rollback's action, read from its start commit's trailers: %+v", a)
	}
	ops.run("reload", chromedp.Navigate(hs.URL+"/pools/agents/rollouts/"+back.ID), chromedp.WaitVisible(chromedp.ID("actions")))
	if s := ops.text("#actions"); !strings.Contains(s, "cp v2 leaks <memory>") || !strings.Contains(s, "ops/") {
		t.Errorf("the rollback page's actions: %q", s)
	}
	ops.shot("rollback-succeeded")

	// Abort a rollout that has not routed claims: a rollback to id2
	// started (not driven) from here.
	wrepo, err := gitops.Open(ctx, w.repo)
	if err != nil {
		t.Fatal(err)
	}
	pending, err := (&rollout.Driver{Repo: wrepo, Pool: "agents"}).Start(ctx, id2, true)
	if err != nil {
		t.Fatal(err)
	}
	ops.run("abort without a reason", chromedp.Navigate(hs.URL+"/pools/agents/rollouts/"+pending.ID), chromedp.WaitVisible(chromedp.ID("abort")),
		chromedp.Click(chromedp.ID("abort")), chromedp.WaitVisible(chromedp.CSS(`[role=alert]`)))
	if msg := ops.text(`[role=alert]`); !strings.Contains(msg, "a reason is required; nothing was done") {
		t.Fatalf("refusal: %q", msg)
	}
	if now, err := rollout.ReadRecord(ctx, repo, "main", "agents", pending.ID); err != nil || now.Outcome != "running" {
		t.Fatalf("a refused abort changed the rollout: %+v %v", now, err)
	}
	ops.run("abort with a reason", chromedp.Navigate(hs.URL+"/pools/agents/rollouts/"+pending.ID), chromedp.WaitVisible(chromedp.ID("abort")),
		chromedp.SendKeys(chromedp.ID("abort-reason"), "wrong target\nsecond line"), chromedp.Click(chromedp.ID("abort")),
		chromedp.WaitVisible(chromedp.Search(`//span[@id="outcome"][contains(., "rolled-back")]`)))
	noUnlabelled(t, ops)
	ab, err := rollout.ReadRecord(ctx, repo, "main", "agents", pending.ID)
	if err != nil || ab.Outcome != "rolled-back" || len(ab.Actions) != 1 {
		t.Fatalf("the aborted rollout: %+v %v", ab, err)
	}
	if a := ab.Actions[0]; a.Step != "rolled-back" || !strings.HasPrefix(a.Actor, "ops/") || a.Reason != "wrong target second line" {
		t.Errorf("the abort's trailers: %+v", a)
	}
	if s := ops.text("#actions"); !strings.Contains(s, "wrong target second line") {
		t.Errorf("the aborted rollout's page: %q", s)
	}
	ops.shot("rollout-aborted-with-reason")
}

// noUnlabelled fails t when a visible input of the open page has no label.
func noUnlabelled(t *testing.T, b *browser) {
	t.Helper()
	un := eval[[]string](b, "labels", `Array.from(document.querySelectorAll("input:not([type=hidden]),textarea,select")).filter(e => !e.labels || e.labels.length == 0).map(e => e.outerHTML)`)
	if len(un) != 0 {
		t.Errorf("inputs without a label: %v", un)
	}
}

// opsWho is the token id of token.
func opsWho(t *testing.T, control, token string) string {
	t.Helper()
	c, err := controlapi.NewClient(control, token)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.WhoAmI(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return w.TokenID
}
