package control

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
)

// lockedBuffer is a log safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAPIErrorsKeepHostDetailInLog (issue 37, finding 6, the control
// plane): its config repository, a directory of this host, goes away
// before the plane read it; a submit then fails (503) with a reason and an error id, and not the
// repository's path nor what git said; the plane's log holds them under
// that id. A refusal the client can fix is still told whole.
func TestAPIErrorsKeepHostDetailInLog(t *testing.T) {
	ctx := context.Background()
	state := filepath.Join(t.TempDir(), "state-c3d5")
	repoDir := filepath.Join(state, "config.git")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := gitops.InitBare(repoDir, "main"); err != nil {
		t.Fatal(err)
	}
	repo, err := gitops.Open(ctx, repoDir, gitops.WithDepth(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Update(ctx, gitops.Request{Branch: "main", Author: gitops.Signature{Name: "t", Email: "t@example.invalid"},
		Edit: func(tr *gitops.Tree) (*gitops.Commit, error) {
			for _, name := range []string{"tenants/acme.yaml", "tenants/globex.yaml", "profiles/standard.yaml", "profiles/short.yaml", "pricing.yaml"} {
				if err := tr.WriteFile(name, []byte(fixture(t, name))); err != nil {
					return nil, err
				}
			}
			return &gitops.Commit{Subject: "config"}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	s, err := OpenSQLite(ctx, filepath.Join(state, "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var log lockedBuffer
	p, err := New(ctx, Config{Store: s, Config: NewRepoConfig(repo, "main", time.Millisecond), Logger: slog.New(slog.NewJSONHandler(&log, nil)),
		Runtimes: map[string][]Runtime{"agents": nil}, MaxActive: 8, QueueBound: 50, noDispatch: true, manualAdmission: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	h := httptest.NewServer(NewServer(p))
	defer h.Close()
	tok, _, err := s.CreateToken(ctx, "acme", controlapi.ScopeTenant, "")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := controlapi.NewClient(h.URL, tok)
	// A refusal the client can fix names what is at fault.
	var ae *controlapi.APIError
	_, _, err = c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true"), IdempotencyKey: "no spaces here"})
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Body.ID != "" || !strings.Contains(ae.Body.Error, `"no spaces here"`) {
		t.Fatalf("bad idempotency key: %v", err)
	}

	// The plane has loaded no configuration yet: with its repository gone
	// it has none to keep.
	if err := os.RemoveAll(repoDir); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, h.URL+"/v1/jobs", strings.NewReader(`{"pool":"agents","profile":"standard","commands":[["true"]]}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(raw)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("submit with the config repository gone: %d %s", resp.StatusCode, body)
	}
	for _, leak := range []string{state, "state-c3d5", "config.git", "repository"} {
		if strings.Contains(body, leak) {
			t.Errorf("the answer reveals %q: %s", leak, body)
		}
	}
	m := regexp.MustCompile(`"error":"the control plane cannot serve this now; retry \(error id (e-[0-9a-f]{12})\)".*"id":"(e-[0-9a-f]{12})"`).FindStringSubmatch(body)
	if m == nil || m[1] != m[2] {
		t.Fatalf("answer %s: want a reason and an error id", body)
	}
	var line string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, `"id":"`+m[1]+`"`) {
			line = l
		}
	}
	if !strings.Contains(line, `"path":"/v1/jobs"`) || !strings.Contains(line, repoDir) {
		t.Fatalf("the log holds no detail naming %s under %s:\n%s", repoDir, m[1], log.String())
	}
}
