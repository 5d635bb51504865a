package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/control"
	"github.com/slipway-dev/slipway/pkg/control/incidents"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
)

// The six incidents of seed 000's table-top, caused for real (incident 6,
// a delete that times out, is the reconciler's), each ending confirmed or
// visibly recoverable with an owner and a deadline, and each shown by
// `slipway incidents` from the durable records. Incident 2 (a worker that
// crashes after create) is TestControlKill9 (its one failpoint says why).
// The faults here are real: a command that ignores SIGTERM, a short-lived
// credential, a config repository taken away, a destination that refuses.

// report runs `slipway incidents -o json` over db (and state, if set) and
// returns what it found.
func report(t *testing.T, db, state string) (*incidents.Report, string) {
	t.Helper()
	args := []string{"incidents", "--db", db}
	if state != "" {
		args = append(args, "--state", state)
	}
	start := time.Now()
	r := run(t, "", append(args, "-o", "json")...)
	took := time.Since(start)
	if r.code != 0 {
		t.Fatalf("incidents: %+v", r)
	}
	var rep incidents.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("incidents -o json: %v\n%s", err, r.stdout)
	}
	text := run(t, "", args...)
	if text.code != 0 {
		t.Fatalf("incidents: %+v", text)
	}
	t.Logf("slipway incidents took %v:\n%s", took.Round(time.Millisecond), text.stdout)
	return &rep, text.stdout
}

// of returns the incidents of kind k about job (or run) id.
func of(rep *incidents.Report, k incidents.Kind, id string) []incidents.Incident {
	var out []incidents.Incident
	for _, kr := range rep.Kinds {
		if kr.Kind != string(k) {
			continue
		}
		for _, i := range kr.Incidents {
			if i.Job == id || i.Run == id {
				out = append(out, i)
			}
		}
	}
	return out
}

func evidence(i incidents.Incident, name string) string {
	for _, f := range i.Evidence {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// Incident 1, the agent hangs: a command that ignores SIGTERM and floods
// its output runs past the job's deadline. The job ends
// deadline_exceeded; the command was killed after the grace (the stop
// outcome is recorded); the output kept is bounded, with the marker of
// what was dropped; the sandbox was released.
func TestIncidentAgentHangs(t *testing.T) {
	w := newControlWorld(t)
	ctx := context.Background()
	db := "sqlite:" + filepath.Join(w.dir, "control.db")
	cp := w.startControl(t, db)
	tok, _ := readToken(w.token(t, db, "acme"))
	c, _ := controlapi.NewClient(cp.url, tok)
	j, _, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", DeadlineSeconds: 3,
		Commands: [][]string{{"sh", "-c", "trap '' TERM; echo started; yes 'a line of output the agent writes' | head -n 20000; echo flooded; sleep 60; echo never"}}})
	if err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, c, j.ID, 60*time.Second, func(j *controlapi.Job) bool { return j.State.Terminal() })
	if j.State != controlapi.DeadlineExceeded || j.StopOutcome != "killed" || len(j.Results) != 1 || !j.Results[0].TimedOut || j.Results[0].Stop != "killed" {
		t.Fatalf("hung job: %s %s %s stop=%q results=%+v", j.State, j.Reason, j.Detail, j.StopOutcome, j.Results)
	}
	if j.OutputDroppedLines == 0 || !strings.Contains(j.Output, "lines dropped ...]") || int64(len(j.Output)) > j.Limits.MaxOutputBytes+200 ||
		!strings.Contains(j.Output, "\nstarted\n") || strings.Contains(j.Output, "\nnever") {
		t.Fatalf("bounded output: %d bytes, dropped %d bytes %d lines:\n%.300s\n...\n%s", len(j.Output), j.OutputDroppedBytes, j.OutputDroppedLines,
			j.Output, j.Output[max(0, len(j.Output)-300):])
	}
	m, err := w.rt.client.Run(ctx, j.RunID)
	if err != nil || !m.Status.Final() || m.Lifecycle.ResourcesReleased.IsZero() {
		t.Fatalf("the hung job's run: %+v %v", m, err)
	}

	rep, text := report(t, db, filepath.Join(w.dir, "runtime-state"))
	got := of(rep, incidents.AgentHang, j.ID)
	if len(got) != 1 || !got[0].Terminal || got[0].State != "deadline_exceeded" || evidence(got[0], "stop outcome") != "killed" ||
		!strings.Contains(evidence(got[0], "output kept"), "dropped") || got[0].Run != j.RunID {
		t.Fatalf("agent_hangs of %s: %+v", j.ID, got)
	}
	if !strings.Contains(text, "agent_hangs (1)") || !strings.Contains(text, "job "+j.ID) {
		t.Errorf("text report:\n%s", text)
	}
}

// Incident 3, the credential expires: a run whose generation pins a secret
// version holds a short-lived credential. Without renewal it expires
// while the run is open and a provider's check fails narrowly (expired,
// naming the fingerprint and secret version); with renewal (the default)
// the runtime renews it at 2/3 of its lifetime, revokes the old one and
// records both receipts. The runtime serves both incidents on its own GET
// /v1/incidents, as slipway incidents --state reads them. The token's
// bytes appear in no log line, error, manifest or report.
func TestIncidentCredentialExpires(t *testing.T) {
	const secretVersion = "vault://kv/agents/api-key#4"
	repo, _ := runtimeConfigRepoPins(t, "secretVersion="+secretVersion)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(restartToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	ctx := context.Background()
	readCredential := func(rt *runtimeProc, g *runtimeapi.Grant) string {
		t.Helper()
		res, err := rt.client.Exec(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, Argv: []string{"cat", "/run/slipway/credentials/token"}})
		if err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "swt_") {
			t.Fatalf("reading the credential in the sandbox: %+v %v", res, err)
		}
		return res.Stdout
	}
	var tokens []string
	var texts []string // everything that must not hold a token

	// No renewal: the credential expires while its run is open.
	rt := startRuntimeArgs(t, repo, state, tokenFile, "--credential-ttl", "2s", "--no-credential-renewal")
	rt.waitWarm(t, 2)
	g, err := rt.client.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	tok := readCredential(rt, g)
	tokens = append(tokens, tok)
	if err := rt.client.CheckCredential(ctx, tok); err != nil {
		t.Fatalf("a fresh credential: %v", err)
	}
	time.Sleep(2200 * time.Millisecond)
	err = rt.client.CheckCredential(ctx, tok)
	var api *runtimeapi.APIError
	fp := runtime.Fingerprint([]byte(tok))
	if !errors.As(err, &api) || api.Status != http.StatusUnauthorized || !strings.Contains(err.Error(), "expired") ||
		!strings.Contains(err.Error(), fp) || !strings.Contains(err.Error(), secretVersion) {
		t.Fatalf("an expired credential: %v", err)
	}
	texts = append(texts, err.Error())
	if err := rt.client.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g.Token}); err != nil {
		t.Fatal(err)
	}
	expiredRun := g.RunID
	if err := rt.stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Logf("runtime stopped: %v", err)
	}
	texts = append(texts, rt.text())

	// Renewal: the credential is replaced before it expires.
	rt = startRuntimeArgs(t, repo, state, tokenFile, "--credential-ttl", "3s")
	rt.waitWarm(t, 2)
	g, err = rt.client.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	first := readCredential(rt, g)
	tokens = append(tokens, first)
	var m *runmanifest.Manifest
	poll(t, 10*time.Second, "a renewal in the manifest", func() (bool, string) {
		m, err = rt.client.Run(ctx, g.RunID)
		if err != nil {
			return false, err.Error()
		}
		return len(m.CredentialIssuances) >= 2, fmt.Sprintf("%d receipts", len(m.CredentialIssuances))
	})
	second := readCredential(rt, g)
	tokens = append(tokens, second)
	r0, r1 := m.CredentialIssuances[0], m.CredentialIssuances[1]
	if second == first || r1.SHA256Fingerprint != runtime.Fingerprint([]byte(second)) || r1.Renews != r0.SHA256Fingerprint ||
		r0.SHA256Fingerprint != runtime.Fingerprint([]byte(first)) || r0.RevokedAt == nil || !r0.RevokedAt.Before(r0.ExpiresAt) {
		t.Fatalf("renewal: receipts %+v", m.CredentialIssuances)
	}
	if err := rt.client.CheckCredential(ctx, second); err != nil {
		t.Fatalf("the renewed credential: %v", err)
	}
	err = rt.client.CheckCredential(ctx, first)
	if err == nil || !strings.Contains(err.Error(), "revoked") || !strings.Contains(err.Error(), r0.SHA256Fingerprint) {
		t.Fatalf("the replaced credential: %v", err)
	}
	texts = append(texts, err.Error())
	if err := rt.client.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g.Token}); err != nil {
		t.Fatal(err)
	}
	if err := rt.client.CheckCredential(ctx, second); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("the credential after release: %v", err)
	}
	renewedRun := g.RunID
	for _, id := range []string{expiredRun, renewedRun} {
		m, err := rt.client.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(m)
		texts = append(texts, string(b))
	}

	db := "sqlite:" + filepath.Join(dir, "control.db")
	rep, text := report(t, db, state)
	// The runtime serves the same incidents from its own records (GET
	// /v1/incidents, its token): the kinds its run manifests and cleanup
	// records show, as slipway incidents --state read them; the control
	// plane's kinds are marked not read.
	served, err := rt.client.Incidents(ctx)
	if err != nil {
		t.Fatalf("GET /v1/incidents on the runtime: %v", err)
	}
	sb, _ := json.Marshal(served)
	texts = append(texts, text, rt.text(), string(sb))
	for _, k := range served.Kinds {
		runtimeKind := k.Kind == string(incidents.CredentialExpiry) || k.Kind == string(incidents.WorkerCrash) || k.Kind == string(incidents.CleanupUnknown)
		if k.Sourced != runtimeKind {
			t.Errorf("the runtime's %s: sourced %v, want %v", k.Kind, k.Sourced, runtimeKind)
		}
		if k.Kind != string(incidents.CredentialExpiry) {
			continue
		}
		var fromCLI []incidents.Incident
		for _, c := range rep.Kinds {
			if c.Kind == string(incidents.CredentialExpiry) {
				fromCLI = c.Incidents
			}
		}
		cb, _ := json.Marshal(fromCLI)
		ab, _ := json.Marshal(k.Incidents)
		if string(ab) != string(cb) || len(k.Incidents) != 2 {
			t.Errorf("the runtime's credential incidents differ from slipway incidents --state:\napi %s\ncli %s", ab, cb)
		}
	}
	if len(served.Kinds) != len(incidents.Kinds) {
		t.Errorf("the runtime's report has %d kinds, want %d", len(served.Kinds), len(incidents.Kinds))
	}
	var api401 *runtimeapi.APIError
	nc, err := runtimeapi.NewClient(rt.base, "not-the-runtime-token")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Incidents(ctx); !errors.As(err, &api401) || api401.Status != http.StatusUnauthorized {
		t.Errorf("GET /v1/incidents with another token: %v, want 401", err)
	}
	exp := of(rep, incidents.CredentialExpiry, expiredRun)
	if len(exp) != 1 || exp[0].Reason != "expired" || !strings.Contains(exp[0].Detail, fp) || !strings.Contains(exp[0].Detail, secretVersion) || !exp[0].Terminal {
		t.Fatalf("credential_expires of %s: %+v", expiredRun, exp)
	}
	ren := of(rep, incidents.CredentialExpiry, renewedRun)
	if len(ren) != 1 || ren[0].Reason != "renewed" || len(ren[0].Receipts) < 2 || !strings.Contains(strings.Join(ren[0].Receipts, "\n"), "renews "+r0.SHA256Fingerprint) {
		t.Fatalf("credential_expires of %s: %+v", renewedRun, ren)
	}
	for _, tk := range tokens {
		for _, s := range texts {
			if strings.Contains(s, strings.TrimSpace(tk)) || strings.Contains(s, strings.TrimPrefix(strings.TrimSpace(tk), "swt_")) {
				t.Fatalf("a token's value is in:\n%s", s)
			}
		}
	}
	if entries, err := filepath.Glob(filepath.Join(state, "*")); err == nil {
		for _, e := range entries {
			if b, err := os.ReadFile(e); err == nil {
				for _, tk := range tokens {
					if strings.Contains(string(b), strings.TrimSpace(tk)) {
						t.Fatalf("a token's value is in %s", e)
					}
				}
			}
		}
	}
}

// Incident 4, policy propagation lags: the runtime follows a mirror of the
// config repository, which is taken away. Its view goes stale: `slipway
// runtime policy` shows the revision in effect, its age and the rules, and
// that claims are refused; a job submitted meanwhile is refused a claim
// (503, the reason recorded on the job) and dispatched once the view is
// fresh again.
func TestIncidentPolicyLags(t *testing.T) {
	w := newControlWorldWith(t, worldOptions{mirror: true, runtimeArgs: []string{"--max-staleness", "1s"}})
	ctx := context.Background()
	db := "sqlite:" + filepath.Join(w.dir, "control.db")
	cp := w.startControlArgs(t, db, nil, "--runtime", "agents="+w.rt.base+","+w.rtTokenFile, "--dispatch-attempts", "8")
	tok, _ := readToken(w.token(t, db, "acme"))
	c, _ := controlapi.NewClient(cp.url, tok)
	head := func(repo string) string {
		r, err := gitops.Open(ctx, repo)
		if err != nil {
			t.Fatal(err)
		}
		_, rev, err := r.Snapshot(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	rev := head(w.rtRepo)
	policy := func(wantCode int) (*runtimeapi.PolicyView, string) {
		t.Helper()
		js := run(t, "", "runtime", "policy", "--runtime", w.rt.base, "--token-file", w.rtTokenFile, "-o", "json")
		var v runtimeapi.PolicyView
		if js.code != wantCode || json.Unmarshal([]byte(js.stdout), &v) != nil {
			t.Fatalf("runtime policy -o json: want exit %d: %+v", wantCode, js)
		}
		text := run(t, "", "runtime", "policy", "--runtime", w.rt.base, "--token-file", w.rtTokenFile)
		if text.code != wantCode {
			t.Fatalf("runtime policy: want exit %d: %+v", wantCode, text)
		}
		return &v, text.stdout
	}
	v, text := policy(0)
	if v.Revision != rev || v.Stale || v.MaxStalenessSeconds != 1 || v.Verification.Source != "skipped" || len(v.Pools) != 1 ||
		v.Pools[0].Network.Mode != "deny" || v.Pools[0].ActiveGeneration == "" || !strings.Contains(text, "claims:        granted") {
		t.Fatalf("fresh policy view: %+v\n%s", v, text)
	}

	// The repository goes away.
	away := w.rtRepo + ".away"
	if err := os.Rename(w.rtRepo, away); err != nil {
		t.Fatal(err)
	}
	poll(t, 10*time.Second, "a stale view", func() (bool, string) {
		v, err := w.rt.client.Policy(ctx)
		if err != nil {
			return false, err.Error()
		}
		return v.Stale, fmt.Sprintf("age %.1fs", v.AgeSeconds)
	})
	_, err := w.rt.client.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "acme"})
	var api *runtimeapi.APIError
	if !errors.As(err, &api) || api.Status != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "stale") ||
		!strings.Contains(err.Error(), rev[:12]) || !strings.Contains(err.Error(), "maximum staleness 1s") {
		t.Fatalf("a claim on a stale view: %v", err)
	}
	v, text = policy(3)
	if !v.Stale || v.Revision != rev || v.AgeSeconds <= 1 || v.LastSyncError == "" || !strings.Contains(v.ClaimsRefused, "stale") ||
		!strings.Contains(text, "REFUSED (503)") || !strings.Contains(text, "last sync:     failed") || !strings.Contains(text, rev) {
		t.Fatalf("stale policy view: %+v\n%s", v, text)
	}
	// The sync error names the repository's path: the API answer says a
	// reason and an error id; the runtime's log has the detail under it.
	id := regexp.MustCompile(`error id (e-[0-9a-f]{12})`).FindStringSubmatch(v.LastSyncError)
	if id == nil || strings.Contains(v.LastSyncError, w.rtRepo) || strings.Contains(v.LastSyncError, w.dir) {
		t.Fatalf("lastSyncError %q: want a reason and an error id, no host path", v.LastSyncError)
	}
	if logText := w.rt.log.text(); !regexp.MustCompile(`config sync failed .*error ` + id[1] + `: .*` + regexp.QuoteMeta(filepath.Base(w.rtRepo))).MatchString(logText) {
		t.Errorf("the runtime's log lacks the sync error under %s", id[1])
	}
	// its readiness probe says the same: not ready, the config repository at fault
	if code, rd := runtimeReadyz(t, w.rt.base); code != 503 || rd.Ready || len(rd.Failing) != 1 || rd.Failing[0].Part != "config repository" ||
		!strings.Contains(rd.Failing[0].Reason, id[1]) {
		t.Fatalf("the runtime's readyz with its repository away: %d %+v", code, rd)
	}
	j, _, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: [][]string{{"echo", "dispatched"}}})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, j.ID, 30*time.Second, func(j *controlapi.Job) bool { return j.DispatchFailures > 0 })

	// The repository is back: the view is fresh, the job runs.
	if err := os.Rename(away, w.rtRepo); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, c, j.ID, 60*time.Second, func(j *controlapi.Job) bool { return j.State.Terminal() })
	if j.State != controlapi.Succeeded || !strings.Contains(j.Output, "dispatched") {
		t.Fatalf("the job after the view was fresh again: %s %s %s notes %+v", j.State, j.Reason, j.Detail, j.Notes)
	}
	if v, _ := policy(0); v.Stale || v.LastSyncError != "" {
		t.Fatalf("policy view after the repository came back: %+v", v)
	}
	if code, rd := runtimeReadyz(t, w.rt.base); code != 200 || !rd.Ready {
		t.Fatalf("the runtime's readyz with its repository back: %d %+v", code, rd)
	}

	rep, _ := report(t, db, "")
	got := of(rep, incidents.PolicyLag, j.ID)
	if len(got) != 1 || got[0].State != "succeeded" || !got[0].Terminal || !strings.Contains(evidence(got[0], "refusal 1"), "stale") ||
		!strings.Contains(evidence(got[0], "refusal 1"), rev[:12]) {
		t.Fatalf("policy_propagation_lags of %s: %+v", j.ID, got)
	}
}

// Incident 5, the artifact export fails: the tenant's destination, which
// requires the result, refuses every delivery (503). The job's result is
// kept; the delivery is retried within its budget (visible while it
// lasts), then ends visibly failed with an owner and a next action, its
// record naming the job, the run and the digest of the result it carries.
func TestIncidentExportFails(t *testing.T) {
	w := newControlWorld(t)
	ctx := context.Background()
	var arrivals atomic.Int64
	refusing := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		arrivals.Add(1)
		rw.Header().Set("Retry-After", "2") // time to see the retries
		http.Error(rw, "destination down for maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(refusing.Close)
	secret := filepath.Join(w.dir, "hook.key")
	if err := os.WriteFile(secret, []byte("hook-secret-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := gitops.Open(ctx, w.repo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Update(ctx, gitops.Request{Branch: "main", Author: gitops.Signature{Name: "t", Email: "t@example.invalid"},
		Edit: func(tr *gitops.Tree) (*gitops.Commit, error) {
			b, err := tr.ReadFile("tenants/acme.yaml")
			if err != nil {
				return nil, err
			}
			dest := "destinations:\n  - {name: archive, url: '" + refusing.URL + "/in', kinds: [result], requiresResult: true, secretRef: {file: " + secret + "}, maxAttempts: 3}\n"
			return &gitops.Commit{Subject: "acme: an archive destination"}, tr.WriteFile("tenants/acme.yaml", append(b, []byte(dest)...))
		}}); err != nil {
		t.Fatal(err)
	}
	db := "sqlite:" + filepath.Join(w.dir, "control.db")
	cp := w.startControl(t, db)
	tok, _ := readToken(w.token(t, db, "acme"))
	c, _ := controlapi.NewClient(cp.url, tok)
	j, _, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: [][]string{{"sh", "-c", "echo the result of the work"}}})
	if err != nil {
		t.Fatal(err)
	}
	// While the budget lasts, the retries are visible: on the job, and in
	// slipway incidents as an open incident whose owner is the output
	// worker and whose deadline is the next try.
	j = waitJob(t, c, j.ID, 60*time.Second, func(j *controlapi.Job) bool {
		return j.Delivery != nil && len(j.Delivery.Destinations) == 1 && j.Delivery.Destinations[0].Retrying != nil
	})
	if rt := j.Delivery.Destinations[0].Retrying; !strings.Contains(rt.LastError, "of a budget of 3") || rt.Attempts < 1 || j.State != controlapi.Succeeded {
		t.Fatalf("retrying: %+v (job %s)", rt, j.State)
	}
	rep, _ := report(t, db, "")
	if got := of(rep, incidents.ExportFailure, j.ID); len(got) != 1 || got[0].State != control.OutcomeRetrying || got[0].Terminal ||
		got[0].Deadline == nil || !strings.Contains(got[0].Owner, "output worker") || !strings.Contains(got[0].Detail, "of a budget of 3") {
		t.Fatalf("artifact_export_fails while retrying: %+v", got)
	}
	j = waitJob(t, c, j.ID, 60*time.Second, func(j *controlapi.Job) bool {
		return j.Delivery != nil && j.Delivery.Acceptance == controlapi.AcceptFailed
	})
	d := j.Delivery.Destinations[0]
	if j.State != controlapi.Succeeded || !strings.Contains(j.Output, "the result of the work") || j.ResultPublished != nil ||
		d.Result == nil || d.Result.Outcome != controlapi.ReceiptFailed || d.Result.Attempts != 3 || d.Result.HTTPStatus != 503 ||
		!strings.Contains(d.Result.Detail, "budget of 3 spent") || arrivals.Load() != 3 {
		t.Fatalf("job with a refusing destination: %s %s published=%v delivery %+v result %+v arrivals %d", j.State, j.Detail, j.ResultPublished,
			j.Delivery, d.Result, arrivals.Load())
	}
	// The result is retained: the stream still holds it.
	st, err := control.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, evs, err := st.Events(ctx, "", j.ID, 0, 0)
	if err != nil || len(evs) == 0 || evs[len(evs)-1].Kind != controlapi.KindResult || !strings.Contains(string(evs[len(evs)-1].Data), "the result of the work") {
		t.Fatalf("the job's events: %v %v", evs, err)
	}
	sum := sha256.Sum256(evs[len(evs)-1].Data)
	digest := "sha256:" + hex.EncodeToString(sum[:])

	rep, text := report(t, db, filepath.Join(w.dir, "runtime-state"))
	got := of(rep, incidents.ExportFailure, j.ID)
	if len(got) != 1 || got[0].State != controlapi.ReceiptFailed || got[0].Attempts != 3 || got[0].Run != j.RunID || !got[0].Terminal ||
		!strings.Contains(got[0].Owner, "tenant acme") || !strings.Contains(got[0].Next, "not dropped") ||
		!strings.Contains(evidence(got[0], "source"), "digest "+digest) || !strings.Contains(evidence(got[0], "source"), j.RunID) {
		t.Fatalf("artifact_export_fails of %s: %+v", j.ID, got)
	}
	if !strings.Contains(text, "artifact_export_fails (1)") {
		t.Errorf("text report:\n%s", text)
	}
}

// runtimeReadyz reads a runtime's GET /readyz.
func runtimeReadyz(t *testing.T, base string) (int, runtimeapi.Readiness) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rd runtimeapi.Readiness
	if err := json.NewDecoder(resp.Body).Decode(&rd); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, rd
}
