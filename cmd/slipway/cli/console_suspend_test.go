package cli

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/console"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// checkpointKey writes a cosign key for a runtime's --checkpoint-key
// (its password in COSIGN_PASSWORD for the rest of the test) and returns
// the runtime arguments.
func checkpointKey(t *testing.T) []string {
	t.Helper()
	priv, _, err := sign.GenerateKeys([]byte("ckpt-pw"))
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "checkpoint.key")
	if err := os.WriteFile(f, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COSIGN_PASSWORD", "ckpt-pw")
	return []string{"--checkpoint-key", f}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// consoleSuspendResume: in the browser, an operator suspends a run that
// a holder claimed straight from the runtime, with a reason, and resumes
// it; the run page's Durable section names the reason and the actor, as
// the runtime's /durable answer does. A suspend without a reason is
// refused and does nothing; so is a tenant's, even with a reason and its
// own CSRF token. The holder's exec is refused as suspended, and after
// the resume it adopts the new grant and finds its workspace.
func consoleSuspendResume(t *testing.T, ops *browser, base string, rc *runtimeapi.Client, control, opsTok, tenantTok string) {
	ctx := context.Background()
	claim := runtimeapi.ClaimBody{Tenant: "acme", RequestKey: "console-suspend.1"}
	gr, err := rc.Claim(ctx, "agents", claim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Exec(ctx, gr.RunID, runtimeapi.ExecBody{Token: gr.Token, Argv: []string{"sh", "-c", "echo half-done > /workspace/progress.txt"}}); err != nil {
		t.Fatal(err)
	}
	actor := "ops/" + opsWho(t, control, opsTok)
	page := base + "/runs/" + gr.RunID

	ops.run("run page, durable", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.ID("suspend-form")))
	noUnlabelled(t, ops)
	if s := ops.text("#durable"); !strings.Contains(s, "not suspended") || !strings.Contains(s, "never suspended") {
		t.Errorf("durable before any suspend: %q", s)
	}
	// Without a reason: refused, nothing done.
	ops.run("suspend without a reason", chromedp.Click(chromedp.ID("suspend")), chromedp.WaitVisible(chromedp.CSS(`[role=alert]`)))
	if msg := ops.text(`[role=alert]`); !strings.Contains(msg, "suspend run "+gr.RunID+": a reason is required; nothing was done") {
		t.Fatalf("refusal: %q", msg)
	}
	ops.shot("run-suspend-refused-without-reason")
	if d, err := rc.Durable(ctx, gr.RunID); err != nil || d.Suspended || d.LastSuspend != nil || d.Checkpoints != 0 {
		t.Fatalf("after a suspend without a reason: %+v %v", d, err)
	}
	if _, err := rc.Exec(ctx, gr.RunID, runtimeapi.ExecBody{Token: gr.Token, Argv: []string{"true"}}); err != nil {
		t.Fatalf("the holder after a refused suspend: %v", err)
	}

	const reason = "host maintenance <kernel 6.1.99>"
	ops.run("suspend with a reason", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.ID("suspend-reason")),
		chromedp.SendKeys(chromedp.ID("suspend-reason"), reason), chromedp.Click(chromedp.ID("suspend")),
		chromedp.WaitVisible(chromedp.ID("resume-form")))
	d, err := rc.Durable(ctx, gr.RunID)
	if err != nil || !d.Suspended || d.LastSuspend == nil || d.LastSuspend.By != "operator" || d.LastSuspend.Actor != actor ||
		d.LastSuspend.Reason != reason || d.LastSuspend.Checkpoint != d.Head {
		t.Fatalf("the runtime's durable answer after the console's suspend: %+v %+v %v", d, d.LastSuspend, err)
	}
	if s := ops.text("#last-suspend"); !strings.Contains(s, "by operator "+actor+": "+reason) {
		t.Errorf("the page's last suspend does not name the actor and the reason: %q", s)
	}
	if s := ops.text("#durable-state"); !strings.HasPrefix(s, "suspended") {
		t.Errorf("durable state: %q", s)
	}
	if n := eval[int](ops, "no markup from the reason", `document.querySelectorAll("#last-suspend kernel").length`); n != 0 {
		t.Errorf("the reason became markup")
	}
	if html := eval[string](ops, "page", `document.documentElement.outerHTML`); strings.Contains(html, opsTok) || strings.Contains(html, gr.Token) {
		t.Errorf("a token on the run page")
	}
	ops.shot("run-suspended-with-reason")
	if _, err := rc.Exec(ctx, gr.RunID, runtimeapi.ExecBody{Token: gr.Token, Argv: []string{"true"}}); !runtimeapi.IsCode(err, runtimeapi.CodeSuspended) {
		t.Fatalf("the holder's exec on the suspended run: %v", err)
	}

	// A tenant cannot resume it, even with a reason and its own CSRF
	// token: 403, nothing done.
	if code := tenantPost(t, base, "/runs/"+gr.RunID+"/resume", tenantTok, "mine now"); code != http.StatusForbidden {
		t.Errorf("a tenant's resume: %d", code)
	}
	if d, err := rc.Durable(ctx, gr.RunID); err != nil || !d.Suspended || d.LastRestore != nil {
		t.Fatalf("after a tenant's resume: %+v %v", d, err)
	}

	const why = "maintenance done"
	ops.run("resume with a reason", chromedp.WaitVisible(chromedp.ID("resume-reason")),
		chromedp.SendKeys(chromedp.ID("resume-reason"), why), chromedp.Click(chromedp.ID("resume")),
		chromedp.WaitVisible(chromedp.ID("suspend-form")))
	d, err = rc.Durable(ctx, gr.RunID)
	if err != nil || d.Suspended || d.LastRestore == nil || d.LastRestore.By != "resume" || d.LastRestore.Actor != actor ||
		d.LastRestore.Reason != why || d.LastRestore.Checkpoint != d.LastSuspend.Checkpoint {
		t.Fatalf("the runtime's durable answer after the console's resume: %+v %+v %v", d, d.LastRestore, err)
	}
	if s := ops.text("#last-restore"); !strings.Contains(s, "by resume "+actor+": "+why) || !strings.Contains(s, d.LastRestore.Into) {
		t.Errorf("the page's last restore does not name the actor, the reason and the sandbox: %q", s)
	}
	ops.shot("run-resumed-with-reason")
	// The holder's token is fenced; it adopts the new grant by its key.
	if _, err := rc.Exec(ctx, gr.RunID, runtimeapi.ExecBody{Token: gr.Token, Argv: []string{"true"}}); !runtimeapi.IsCode(err, runtimeapi.CodeFenced) {
		t.Fatalf("the holder's old token after the resume: %v", err)
	}
	ng, err := rc.Claim(ctx, "agents", claim)
	if err != nil || !ng.Adopted || ng.RunID != gr.RunID || ng.AllocationAttempt != gr.AllocationAttempt+1 {
		t.Fatalf("adopt after the resume: %+v %v", ng, err)
	}
	res, err := rc.Exec(ctx, ng.RunID, runtimeapi.ExecBody{Token: ng.Token, Argv: []string{"cat", "/workspace/progress.txt"}})
	if err != nil || res.Stdout != "half-done\n" {
		t.Fatalf("the workspace after the resume: %+v %v", res, err)
	}
	if err := rc.Release(ctx, ng.RunID, runtimeapi.ReleaseBody{Token: ng.Token}); err != nil {
		t.Fatal(err)
	}
}

// tenantPost posts a reason to the console as token's session, with the
// CSRF token a page of that session carries, and returns the status.
func tenantPost(t *testing.T, base, path, token, reason string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/jobs", nil)
	req.AddCookie(&http.Cookie{Name: console.CookieName, Value: token})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindSubmatch(b)
	if m == nil {
		t.Fatalf("no CSRF token on the tenant's jobs page:\n%s", b)
	}
	form := url.Values{"reason": {reason}, "csrf": {string(m[1])}}
	req, _ = http.NewRequest(http.MethodPost, base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: console.CookieName, Value: token})
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
