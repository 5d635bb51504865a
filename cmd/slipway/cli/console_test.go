package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/console"
	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/need"
)

// browser is a headless Debian chromium of its own (its own cookies),
// logged in to the console at base with token.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
	dir  string
}

func newBrowser(t *testing.T, base, token, shots string) *browser {
	t.Helper()
	bin := need.Binary(t, "chromium", "apt-get install chromium")
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 1000), chromedp.UserDataDir(t.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	bctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(cancelB)
	b := &browser{t: t, ctx: bctx, base: base, dir: shots}
	// The first run starts the browser, which lives as long as that run's
	// context: no timeout on it.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	b.run("log in", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.CSS("nav")))
	return b
}

func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fatal(what, err)
	}
}

func (b *browser) fatal(what string, err error) {
	b.t.Helper()
	html, _ := chromedp.Run(b.ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	b.t.Fatalf("browser: %s: %v\npage:\n%s", what, err, html)
}

func eval[T any](b *browser, what, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.fatal(what, err)
	}
	return v
}

func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		b.fatal("screenshot "+name, err)
	}
	f := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(f, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", f)
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.fatal("text of "+sel, err)
	}
	return s
}

// artifacts is where screenshots go: $SLIPWAY_ARTIFACTS/console, else a
// temporary directory the log names.
func artifacts(t *testing.T) string {
	d := os.Getenv("SLIPWAY_ARTIFACTS")
	if d == "" {
		d = t.TempDir()
	}
	d = filepath.Join(d, "console")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("console screenshots in %s", d)
	return d
}

// The console in a real browser against a real runtime (one that keeps
// checkpoints) and control plane: pages render, a job's events arrive
// live, a cancel without a reason is refused and one with a reason is
// recorded, a run is suspended and resumed with reasons
// (consoleSuspendResume), a tenant cannot reach another tenant's job, the
// keyboard reaches the actions and every input has a label.
func TestConsoleBrowser(t *testing.T) {
	need.Binary(t, "chromium", "apt-get install chromium")
	// The runtime keeps checkpoints (suspend and resume). The generation
	// pins a secret version, so each claim holds a credential; it lives 2s
	// and is not renewed: the job's run (open for more than 5s) holds it
	// past its expiry, a real incident of the runtime's own records for the
	// incidents page. The workspace template carries SLSA provenance signed
	// by a key the repository's verification policy trusts for templates:
	// the runtime verifies it and records its builder for the lineage.
	w := newControlWorldWith(t, worldOptions{pins: []string{"secretVersion=vault://kv/agents/api-key#4"},
		runtimeArgs: append(checkpointKey(t), "--credential-ttl", "2s", "--no-credential-renewal"), prepare: attestTemplateProvenance})
	ctx := context.Background()
	db := "sqlite:" + filepath.Join(w.dir, "control.db")
	acmeTok, _ := readToken(w.token(t, db, "acme"))
	globexTok, _ := readToken(w.token(t, db, "globex"))
	r := run(t, "", "tenant", "token", "create", "ops", "--scope", "operator", "--db", db)
	if r.code != 0 {
		t.Fatalf("operator token: %+v", r)
	}
	opsTok := strings.TrimSpace(r.stdout)
	cp := w.startControl(t, db)

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
	shots := artifacts(t)

	ops := newBrowser(t, hs.URL, opsTok, shots)
	ops.shot("home")

	acme, _ := controlapi.NewClient(cp.url, acmeTok)
	j, _, err := acme.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard",
		Commands: [][]string{{"sh", "-c", "echo first-line; sleep 5; printf 'second-%s \\033[31mred\\033[0m <b>x</b>\\n' line; sleep 120"}}})
	if err != nil {
		t.Fatal(err)
	}
	running := waitJob(t, acme, j.ID, 60*time.Second, func(j *controlapi.Job) bool { return j.State == controlapi.Running })

	// The job's page opens before its second line is printed: the line
	// arrives live over the page's EventSource.
	ops.run("job page", chromedp.Navigate(hs.URL+"/jobs/"+j.ID), chromedp.WaitVisible(chromedp.ID("events")))
	ops.run("first line", chromedp.WaitVisible(chromedp.Search(`//ol[@id="events"]/li[contains(., "stdout first-line")]`)))
	if s := ops.text("#events"); strings.Contains(s, "second-line") {
		t.Fatalf("the second line was printed before the page opened; this would not show it arriving live:\n%s", s)
	}
	ops.run("second line, live", chromedp.WaitVisible(chromedp.Search(`//ol[@id="events"]/li[contains(., "second-line")]`)))
	ev := ops.text("#events")
	if strings.Contains(ev, "\x1b") || !strings.Contains(ev, "second-line red <b>x</b>") {
		t.Errorf("events: terminal escapes kept or markup lost: %q", ev)
	}
	bolds := eval[int](ops, "no markup from output", `document.querySelectorAll("#events b").length`)
	if bolds != 0 {
		t.Errorf("the job's output became markup: %d <b> elements", bolds)
	}
	ops.shot("job-live-events")

	// Every visible input has a label; the keyboard reaches the reason
	// and the cancel button, in that order.
	unlabelled := eval[[]string](ops, "labels", `Array.from(document.querySelectorAll("input:not([type=hidden]),textarea,select")).filter(e => !e.labels || e.labels.length == 0).map(e => e.outerHTML)`)
	if len(unlabelled) != 0 {
		t.Errorf("inputs without a label: %v", unlabelled)
	}
	var order []string
	for i := 0; i < 40; i++ {
		ops.run("tab", chromedp.KeyEvent("\t"))
		id := eval[string](ops, "focus", `document.activeElement.id || document.activeElement.tagName`)
		order = append(order, id)
		if id == "cancel" {
			break
		}
	}
	joined := strings.Join(order, " ")
	if !strings.Contains(joined, "reason") || order[len(order)-1] != "cancel" || strings.Index(joined, "reason") > strings.Index(joined, "cancel") {
		t.Fatalf("tab order does not reach the reason, then the cancel button: %v", order)
	}

	// A cancel without a reason is refused and cancels nothing.
	ops.run("cancel without a reason", chromedp.Click(chromedp.ID("cancel")), chromedp.WaitVisible(chromedp.CSS(`[role=alert]`)))
	if msg := ops.text(`[role=alert]`); !strings.Contains(msg, "a reason is required") {
		t.Fatalf("refusal: %q", msg)
	}
	ops.shot("cancel-refused-without-reason")
	if got, err := acme.Get(ctx, j.ID); err != nil || got.State != controlapi.Running || got.Cancellation != nil {
		t.Fatalf("after a refused cancel: %s %+v %v", got.State, got.Cancellation, err)
	}
	// With a reason: the job is canceled and the reason recorded.
	ops.run("cancel with a reason", chromedp.Navigate(hs.URL+"/jobs/"+j.ID), chromedp.WaitVisible(chromedp.ID("reason")),
		chromedp.SendKeys(chromedp.ID("reason"), "stuck on a dead mirror"), chromedp.Click(chromedp.ID("cancel")),
		chromedp.WaitVisible(chromedp.ID("cancel-reason")))
	got := waitJob(t, acme, j.ID, 60*time.Second, func(j *controlapi.Job) bool { return j.State.Terminal() })
	if got.State != controlapi.Canceled || got.Cancellation == nil || got.Cancellation.Reason != "stuck on a dead mirror" || got.Cancellation.RequestedBy == "" {
		t.Fatalf("canceled job: %s %+v", got.State, got.Cancellation)
	}
	ops.run("reload", chromedp.Navigate(hs.URL+"/jobs/"+j.ID), chromedp.WaitVisible(chromedp.ID("cancel-reason")))
	ops.shot("job-canceled-with-reason")

	// A run's lineage, the pool and a generation.
	ops.run("run page", chromedp.Navigate(hs.URL+"/runs/"+running.RunID), chromedp.WaitVisible(chromedp.CSS("svg")))
	if s := ops.text("figure"); !strings.Contains(s, running.SandboxID) || !strings.Contains(s, running.Generation[:14]) {
		t.Errorf("lineage does not name the sandbox %s and generation %s: %q", running.SandboxID, running.Generation, s)
	}
	// This world's template carries no SBOM attestation: the lineage says
	// its packages are not indexed, as the runtime's GET
	// /v1/runs/{run}/packages answers.
	if s := ops.text("figure"); !strings.Contains(s, "workspace template packages") || !strings.Contains(s, "not indexed (no verified SBOM)") {
		t.Errorf("lineage does not say the template's packages are not indexed: %q", s)
	}
	// Its SLSA provenance verified (attestTemplateProvenance): the runtime
	// recorded its builder, and the lineage draws it; the runner image has
	// no provenance, and its builder node says so.
	builders := eval[[]string](ops, "builder nodes", `Array.from(document.querySelectorAll("figure svg g.builder")).map(g => g.textContent)`)
	if !slices.Contains(builders, "workspace template builder"+consoleBuilder) || !slices.Contains(builders, "runner image builderno provenance") {
		t.Errorf("the lineage's builder nodes: %q", builders)
	}
	ops.shot("run-lineage")
	ops.run("pool page", chromedp.Navigate(hs.URL+"/pools/agents"), chromedp.WaitVisible(chromedp.ID("generations")))
	if s := ops.text("#warm-hit"); !strings.Contains(s, "of 1)") {
		t.Errorf("warm hit over the one run: %q", s)
	}
	ops.shot("pool")
	ops.run("generation page", chromedp.Navigate(hs.URL+"/pools/agents/generations/"+running.Generation), chromedp.WaitVisible(chromedp.CSS("table")))
	if s := ops.text("table"); !strings.Contains(s, "runner") || !strings.Contains(s, "workspaceTemplate") {
		t.Errorf("generation pins: %q", s)
	}
	ops.shot("generation")
	ops.run("questions", chromedp.Navigate(hs.URL+"/questions"), chromedp.WaitVisible(chromedp.CSS("ol")))
	ops.shot("questions")
	// The runtime runs its cleanup reconciler (by default): the cleanup
	// page shows its records, reached from the operator's question.
	ops.run("cleanup page", chromedp.Click(chromedp.Search(`//a[@href="/cleanup" and not(ancestor::nav)]`)), chromedp.WaitVisible(chromedp.CSS("table.cleanup-remaining")))
	if s := ops.text("main"); !strings.Contains(s, "Runtime local") || !strings.Contains(s, "Remaining:") || strings.Contains(s, "runs no cleanup reconciler") {
		t.Errorf("cleanup page: %q", s)
	}
	ops.shot("cleanup")

	// The pool's time and cost by state: the runtime's answer (GET
	// /v1/pools/agents/cost) is what slipway cost reads from the same
	// ledger for the same window, every field of it; the page shows it.
	rc, err := runtimeapi.NewClient(w.rt.base, restartToken)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(-time.Second).UTC().Truncate(time.Second)
	since := until.Add(-time.Hour)
	fromAPI, err := rc.PoolCost(ctx, "agents", since, until)
	if err != nil {
		t.Fatal(err)
	}
	r = run(t, "", "cost", "--state", filepath.Join(w.dir, "runtime-state"), "--pool", "agents", "--repo", w.repo,
		"--since", since.Format(time.RFC3339), "--until", until.Format(time.RFC3339), "-o", "json")
	var fromCLI runtimeapi.PoolCost
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fromCLI); err != nil || r.code != 0 {
		t.Fatalf("slipway cost, read as the API's wire type: %v %+v", err, r)
	}
	if !reflect.DeepEqual(fromAPI, &fromCLI) {
		t.Errorf("the runtime's cost answer differs from the ledger's:\napi %+v\ncli %+v", fromAPI, &fromCLI)
	}
	active := 0.0
	for _, st := range fromAPI.States {
		if st.State == "active" {
			active = st.Seconds
		}
	}
	if active <= 0 || fromAPI.Currency == "" {
		t.Errorf("the canceled job's sandbox was active, priced in the demo's currency: %+v", fromAPI)
	}
	if _, err := rc.PoolCost(ctx, "agents", until, since); err == nil || !strings.Contains(err.Error(), "until must be after since") {
		t.Errorf("an empty window: %v", err)
	}
	ops.run("cost page", chromedp.Navigate(hs.URL+"/pools/agents"), chromedp.WaitVisible(chromedp.ID("cost-link")),
		chromedp.Click(chromedp.ID("cost-link")), chromedp.WaitVisible(chromedp.CSS("table.cost-states")))
	noUnlabelled(t, ops)
	if s := ops.text(`tr[data-state="active"]`); !strings.HasPrefix(s, "active") {
		t.Errorf("cost page, active row: %q", s)
	}
	if s := ops.text("#cost-known"); !strings.Contains(s, "Known cost: ") || !strings.Contains(s, fromAPI.Currency) {
		t.Errorf("cost page, known cost: %q", s)
	}
	ops.shot("pool-cost")

	// Incidents: the control plane's answer (GET /v1/incidents) is what
	// slipway incidents reads from the same store; a tenant is refused;
	// the page is reached from the operator's questions.
	opsAPI, _ := controlapi.NewClient(cp.url, opsTok)
	inc, err := opsAPI.Incidents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r = run(t, "", "incidents", "--db", db, "-o", "json")
	var incCLI controlapi.Incidents
	dec = json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&incCLI); err != nil || r.code != 0 {
		t.Fatalf("slipway incidents, read as the API's wire type: %v %+v", err, r)
	}
	if !reflect.DeepEqual(inc, &incCLI) || len(inc.Kinds) < 6 {
		t.Errorf("the control plane's incidents differ from the store's:\napi %+v\ncli %+v", inc, &incCLI)
	}
	if _, err := acme.Incidents(ctx); err == nil || !strings.Contains(err.Error(), "403") && !strings.Contains(err.Error(), "operator") {
		t.Errorf("a tenant's incidents: %v", err)
	}
	ops.run("incidents from the questions", chromedp.Navigate(hs.URL+"/questions"), chromedp.WaitVisible(chromedp.CSS("ol")),
		chromedp.Click(chromedp.Search(`//main//a[@href="/incidents"]`)), chromedp.WaitVisible(chromedp.ID("incidents-open")))
	if n := eval[int](ops, "kinds", `document.querySelectorAll("section.incident-kind").length`); n != len(inc.Kinds) {
		t.Errorf("the incidents page shows %d kinds, the API %d", n, len(inc.Kinds))
	}
	if s := ops.text(`section[data-kind="delete_times_out"]`); !strings.Contains(s, "cleanup page") {
		t.Errorf("the deletes that timed out point at the cleanup page: %q", s)
	}
	// The runtime's own incidents are merged in, labelled by source: the
	// job's run held its credential past its expiry, as the runtime's GET
	// /v1/incidents reports it.
	rtInc, err := rc.Incidents(ctx)
	if err != nil {
		t.Fatalf("the runtime's incidents: %v", err)
	}
	found := false
	for _, k := range rtInc.Kinds {
		for _, i := range k.Incidents {
			found = found || k.Kind == "credential_expires" && i.Run == running.RunID && i.Reason == "expired"
		}
	}
	if !found {
		t.Errorf("the runtime reports no expired credential of run %s: %+v", running.RunID, rtInc)
	}
	if s := ops.text("#incident-sources"); !strings.Contains(s, "control plane: read") || !strings.Contains(s, "runtime local: read") {
		t.Errorf("incident sources: %q", s)
	}
	row := `section[data-kind="credential_expires"] tr[data-source="runtime local"]`
	if s := ops.text(row); !strings.Contains(s, running.RunID) || !strings.Contains(s, "expired") {
		t.Errorf("the runtime's credential incident on the page: %q", s)
	}
	ops.shot("incidents")

	// Suspend and resume a run, with reasons, as an operator; a tenant
	// and a missing reason are refused.
	consoleSuspendResume(t, ops, hs.URL, rc, cp.url, opsTok, globexTok)

	// Another tenant cannot reach acme's job, its events, or an
	// operator's page.
	globex := newBrowser(t, hs.URL, globexTok, shots)
	globex.run("another tenant's job", chromedp.Navigate(hs.URL+"/jobs/"+j.ID), chromedp.WaitVisible(chromedp.CSS(`[role=alert]`)))
	if s := globex.text("main"); strings.Contains(s, "first-line") || !strings.Contains(s, "404") {
		t.Errorf("globex on acme's job: %q", s)
	}
	globex.shot("tenant-refused-other-tenant-job")
	for _, p := range []string{"/jobs/" + j.ID + "/events", "/pools/agents", "/runs/" + running.RunID} {
		req, _ := http.NewRequest("GET", hs.URL+p, nil)
		req.AddCookie(&http.Cookie{Name: console.CookieName, Value: globexTok})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusForbidden {
			t.Errorf("globex GET %s: %d", p, resp.StatusCode)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: CSP %q", p, csp)
		}
	}
	// A tenant cannot cancel, even with a reason and its own CSRF token.
	globex.run("jobs list", chromedp.Navigate(hs.URL+"/jobs"), chromedp.WaitVisible(chromedp.CSS("table")))
	jobs := globex.text("main")
	if strings.Contains(jobs, j.ID) {
		t.Errorf("globex's job list shows acme's job")
	}
}

// consoleBuilder is the builder the console world's template provenance
// names.
const consoleBuilder = "https://ci.example/builders/template/v1"

// attestTemplateProvenance signs SLSA provenance (builder consoleBuilder)
// for the workspace template of repo's active generation with a new key,
// and commits a verification policy that requires it of templates, with
// that key, and lets the control-plane and runner images through
// unverified.
func attestTemplateProvenance(t *testing.T, repo string) {
	t.Helper()
	ctx := context.Background()
	r, err := gitops.Open(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	tree, _, err := r.Snapshot(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	st, err := pool.ReadState("agents", tree.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	active, ok := st.Active()
	if !ok {
		t.Fatal("the world's pool has no active generation")
	}
	file := pool.GenerationFile("agents", active.ID)
	b, err := tree.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	g, err := generation.ParseNamed(b, file)
	if err != nil {
		t.Fatal(err)
	}
	d, err := name.NewDigest(g.Pins[generation.WorkspaceTemplate].Image)
	if err != nil {
		t.Fatal(err)
	}
	priv, pub, err := sign.GenerateKeys([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := sign.LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	prov, err := attest.Provenance(attest.TemplateBuild{Name: "busybox", TemplateID: d.DigestStr(), SpecDigest: "sha256:" + strings.Repeat("b", 64),
		BaseRef: "registry.example/base:1", BaseDigest: "sha256:" + strings.Repeat("c", 64), BuilderID: consoleBuilder, Epoch: 0})
	if err != nil {
		t.Fatal(err)
	}
	pb, err := attest.Marshal(prov)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sign.Attest(ctx, d, sv, pb, sign.WithOfflineNoTlog()); err != nil {
		t.Fatal(err)
	}
	pol := `apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: console}
spec:
  transparencyLog: none
  keys: [{name: ci, publicKeyFile: ci.pub}]
  rules:
    - {name: templates, match: {kinds: [workspace-template]}, attestations: [{type: slsaprovenance, keys: [ci], builderID: "` + consoleBuilder + `"}]}
    - {name: programs, match: {kinds: [control-plane, runner]}, allowUnverified: true}
`
	if _, err := r.Update(ctx, gitops.Request{Branch: "main", Author: gitops.Signature{Name: "t", Email: "t@example.invalid"},
		Edit: func(tr *gitops.Tree) (*gitops.Commit, error) {
			if err := tr.WriteFile(pool.PolicyPath, []byte(pol)); err != nil {
				return nil, err
			}
			return &gitops.Commit{Subject: "verification policy: templates need provenance"}, tr.WriteFile("policies/ci.pub", pub)
		}}); err != nil {
		t.Fatal(err)
	}
}
