package control

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
)

// A config repository that cannot be read makes the plane not ready (it
// keeps serving the last good configuration), and ready again once fixed;
// the answer names the part, never the repository's URL.
func TestReadyzNamesConfigRepository(t *testing.T) {
	ctx := context.Background()
	s, err := OpenSQLite(ctx, t.TempDir()+"/control.db")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	repo := configRepo(t)
	p := newPlane(t, s, repo, 8)
	h := httptest.NewServer(NewServer(p))
	defer h.Close()
	tok, _, _ := s.CreateToken(ctx, "acme", controlapi.ScopeTenant, "")
	c, _ := controlapi.NewClient(h.URL, tok)
	submit := func(k string) {
		_, _, _ = c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true"), IdempotencyKey: k})
	}
	submit("first")
	if code, rd := readyz(t, h.URL); code != 200 || !rd.Ready {
		t.Fatalf("readyz: %d %+v", code, rd)
	}
	good := fixture(t, "tenants/globex.yaml")
	commit(t, repo, "break globex", func(tr *gitops.Tree) error { return tr.WriteFile("tenants/globex.yaml", []byte("concurrency: [\n")) })
	submit("broken")
	code, rd := readyz(t, h.URL)
	if code != 503 || len(rd.Failing) != 1 || rd.Failing[0].Part != "config repository" {
		t.Fatalf("readyz with a broken config: %d %+v", code, rd)
	}
	if strings.Contains(rd.Failing[0].Reason, "globex.yaml") || strings.Contains(rd.Failing[0].Reason, "http") {
		t.Errorf("readyz tells the detail: %q", rd.Failing[0].Reason)
	}
	commit(t, repo, "fix globex", func(tr *gitops.Tree) error { return tr.WriteFile("tenants/globex.yaml", []byte(good)) })
	submit("fixed")
	if code, rd := readyz(t, h.URL); code != 200 || !rd.Ready {
		t.Fatalf("readyz once fixed: %d %+v", code, rd)
	}
}
