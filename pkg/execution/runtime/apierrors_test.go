package runtime_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
)

// TestAPIErrorsKeepHostDetailInLog (issue 37, finding 6): a real failure
// (a sandbox whose template's root file system was removed from the state
// directory cannot start) answers a claim through the HTTP API with a
// reason and an error id, and neither the state directory's path nor the
// bubblewrap command line; the runtime's log holds both under that id. A
// refusal the client can fix still names the pool at fault.
func TestAPIErrorsKeepHostDetailInLog(t *testing.T) {
	w := newWarmWorld(t)
	ctx := context.Background()
	state := filepath.Join(t.TempDir(), "state-b2c4")
	be, err := local.New(filepath.Join(state, "sandboxes"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	d := w.desired(t, "rev-1", 1, w.generation(t, nil))
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(filepath.Join(state, "artifacts")))
	var log syncBuffer
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, newStore(t), time.Minute, runtime.WithLog(&log))
	t.Cleanup(func() { rt.Close() })
	if rep := warm.Reconcile(ctx, d); len(rep.Errors) > 0 {
		t.Fatal(rep.Errors)
	}
	srv, err := runtime.NewServer(rt, nil, be, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c, err := runtimeapi.NewClient(hs.URL, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	// The warm member goes to a first claim; its record in the state
	// directory is then damaged, so that listing the pool's sandboxes
	// fails with an error naming the record's path.
	g, err := c.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g.Token})
	record := filepath.Join(state, "sandboxes", "sandboxes", g.SandboxID, "sandbox.json")
	if err := os.WriteFile(record, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}

	// And the runner binary the backend keeps in the state directory is
	// replaced by one that is not a program: the next sandbox starts under
	// bubblewrap and ends before its runner answers.
	var bins int
	err = filepath.WalkDir(filepath.Join(state, "sandboxes", "runners"), func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			bins++
			if err = os.Remove(p); err == nil { // (the running one keeps its copy)
				err = os.WriteFile(p, []byte("not a program"), 0o755)
			}
		}
		return err
	})
	if err != nil || bins == 0 {
		t.Fatalf("no runner binary replaced under %s: %v", state, err)
	}

	for _, q := range []struct{ method, path, body, detail string }{
		{http.MethodGet, "/v1/pools/agents", "", record},
		{http.MethodPost, "/v1/pools/agents/claims", `{"tenant":"acme"}`, "before its runner answered"},
	} {
		resp, err := http.DefaultClient.Do(authed(t, q.method, hs.URL+q.path, q.body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(raw)
		if resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("%s %s with a damaged record: %d %s", q.method, q.path, resp.StatusCode, body)
		}
		for _, leak := range []string{state, "state-b2c4", "sandbox.json", "bwrap", "sb-", "runner", "exit"} {
			if strings.Contains(body, leak) {
				t.Errorf("%s %s: the answer reveals %q: %s", q.method, q.path, leak, body)
			}
		}
		m := regexp.MustCompile(`^\{"error":"internal error \(error id (e-[0-9a-f]{12})\)","code":"internal","id":"(e-[0-9a-f]{12})"\}\n$`).FindStringSubmatch(body)
		if m == nil || m[1] != m[2] {
			t.Fatalf("%s %s: answer %s: want a reason and an error id", q.method, q.path, body)
		}
		var line string
		for _, l := range strings.Split(log.String(), "\n") {
			if strings.Contains(l, "error "+m[1]+":") {
				line = l
			}
		}
		// The detail is in the log under the id: the kind the answer must
		// not carry (the record's path in the state directory, what the
		// sandbox printed as it died).
		if !strings.Contains(line, q.method+" "+q.path+": 500:") || !strings.Contains(line, q.detail) {
			t.Fatalf("the log holds no detail under %s with %q:\n%s", m[1], q.detail, log.String())
		}
	}

	// Through the client: the reason and the id.
	_, err = c.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "acme"})
	var ae *runtimeapi.APIError
	if !errors.As(err, &ae) || ae.ID == "" || ae.Code != runtimeapi.CodeInternal || !strings.Contains(err.Error(), "error id "+ae.ID) || strings.Contains(err.Error(), state) {
		t.Fatalf("client error %v (%+v)", err, ae)
	}
	// A refusal the client can fix is told whole.
	_, err = c.Claim(ctx, "no-such-pool", runtimeapi.ClaimBody{Tenant: "acme"})
	if !errors.As(err, &ae) || ae.Code != runtimeapi.CodeNoPool || ae.ID != "" || !strings.Contains(ae.Reason, `"no-such-pool"`) {
		t.Fatalf("unknown pool: %v (%+v)", err, ae)
	}
}

func authed(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	return req
}
