package console_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/console"
	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
)

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// post submits form to the console as token's session, with the CSRF
// token a page of that session carries.
func post(t *testing.T, base, path, token string, form url.Values) (int, string) {
	t.Helper()
	_, page := get(t, base+"/jobs", token)
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the jobs page:\n%s", page)
	}
	form.Set("csrf", m[1])
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: console.CookieName, Value: token})
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A console that cannot act says why, and does nothing: one that only
// reads refuses an abort, one without an evidence key a rollback; a
// reason is asked for before anything else.
func TestActionsRefusedWithReason(t *testing.T) {
	cp, ops := startControl(t)
	rt := startRuntime(t)
	readOnly, err := console.New(cp, console.WithRuntime("a", rt, runtimeToken))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { readOnly.Close() })
	noKey, err := console.New(cp, console.WithRuntime("a", rt, runtimeToken),
		console.WithConfigWriter(func(ctx context.Context) (*gitops.Repo, error) {
			return nil, errors.New("the test's console never opens the repository")
		}, gitops.Signature{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { noKey.Close() })
	ro, nk := httptest.NewServer(readOnly), httptest.NewServer(noKey)
	t.Cleanup(ro.Close)
	t.Cleanup(nk.Close)

	for _, c := range []struct {
		base, path, reason string
		status             int
		want               string
	}{
		{ro.URL, "/pools/agents/rollouts/ro-0123456789ab/abort", "", http.StatusBadRequest, "a reason is required; nothing was done"},
		{ro.URL, "/pools/agents/rollouts/ro-0123456789ab/abort", "stuck", http.StatusConflict, "this console only reads"},
		{ro.URL, "/pools/agents/rollback", "bad cp", http.StatusConflict, "this console only reads"},
		{nk.URL, "/pools/agents/rollback", "", http.StatusBadRequest, "a reason is required; nothing was done"},
		{nk.URL, "/pools/agents/rollback", "bad cp", http.StatusConflict, "no evidence key to sign a rollback"},
	} {
		code, body := post(t, c.base, c.path, ops, url.Values{"reason": {c.reason}, "to": {"g-0123"}})
		if code != c.status || !strings.Contains(body, c.want) {
			t.Errorf("POST %s reason %q: %d, want %d saying %q\n%s", c.path, c.reason, code, c.status, c.want, body)
		}
	}
}

// The cost endpoint names a bad parameter and tells no state directory
// when the runtime has no ledger yet; the cost page says the runtime keeps
// none; a control plane that serves no incidents is said so.
func TestCostAndIncidentsRefusals(t *testing.T) {
	rt := startRuntime(t, runtime.WithCost(func(ctx context.Context, pool string, since, until time.Time) (any, error) {
		return nil, cost.ErrNotFound // what cost.Open says before a runtime's first interval
	}))
	c, err := runtimeapi.NewClient(rt, runtimeToken)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	_, err = c.PoolCost(context.Background(), "agents", now.Add(-time.Hour), now)
	var ae *runtimeapi.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Reason != "this runtime has no cost ledger yet" {
		t.Errorf("no ledger: %v", err)
	}
	req, _ := http.NewRequest(http.MethodGet, rt+"/v1/pools/agents/cost?since=yesterday", nil)
	req.Header.Set("Authorization", "Bearer "+runtimeToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `since=\"yesterday\" is not an RFC 3339 time`) {
		t.Errorf("a bad since: %d %s", resp.StatusCode, b)
	}

	cp, ops := startControl(t)
	srv, err := console.New(cp, console.WithRuntime("a", rt, runtimeToken), console.WithRuntime("b", startRuntime(t), runtimeToken))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	code, body := get(t, hs.URL+"/pools/agents/cost", ops)
	if code != http.StatusOK || strings.Count(body, "this runtime keeps no cost ledger, or not yet") != 2 {
		t.Errorf("cost page: %d\n%s", code, body)
	}
	if code, body := get(t, hs.URL+"/pools/agents/cost?window=forever", ops); code != http.StatusBadRequest || !strings.Contains(body, "is not a positive duration") {
		t.Errorf("a bad window: %d\n%s", code, body)
	}
	if code, body := get(t, hs.URL+"/incidents", ops); code != http.StatusOK || !strings.Contains(body, "This control plane serves no incidents") {
		t.Errorf("incidents page: %d\n%s", code, body)
	}
}
