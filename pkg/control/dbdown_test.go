package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/testharness/need"
	"github.com/slipway-dev/slipway/testharness/pgtest"
)

// PostgreSQL goes away for a few seconds: submits fail clearly (503 with
// Retry-After, nothing stored half) and succeed again once it is back.
func TestDatabaseGoesAway(t *testing.T) {
	pgtest.Need(t)
	dir, err := os.MkdirTemp("", "slipway-pgdown-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	srv, err := pgtest.Start(ctx, dir)
	if errors.Is(err, pgtest.ErrNotInstalled) {
		need.Missing(t, "%v (run `make deps`)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	s, err := OpenPostgres(ctx, srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := newPlane(t, s, configRepo(t), 8)
	h := httptest.NewServer(NewServer(p))
	defer h.Close()
	tok, _, _ := s.CreateToken(ctx, "globex", controlapi.ScopeTenant, "")
	c, _ := controlapi.NewClient(h.URL, tok)
	submit := func(k string) error {
		_, _, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true"), IdempotencyKey: k})
		return err
	}
	if err := submit("before"); err != nil {
		t.Fatal(err)
	}
	if code, rd := readyz(t, h.URL); code != 200 || !rd.Ready {
		t.Fatalf("readyz with the database up: %d %+v", code, rd)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	// the readiness probe names the database, not its host or the driver's words
	code, rd := readyz(t, h.URL)
	if code != 503 || rd.Ready || len(rd.Failing) != 1 || rd.Failing[0].Part != "database" || !strings.Contains(rd.Failing[0].Reason, "error id e-") {
		t.Fatalf("readyz with the database away: %d %+v", code, rd)
	}
	if strings.Contains(rd.Failing[0].Reason, dir) || strings.Contains(rd.Failing[0].Reason, "connect") {
		t.Errorf("readyz tells the detail: %q", rd.Failing[0].Reason)
	}
	var ae *controlapi.APIError
	for i := range 3 {
		err := submit(fmt.Sprint("down-", i))
		if !errors.As(err, &ae) || ae.Status != 503 || ae.RetryAfter <= 0 {
			t.Fatalf("submit with the database away: %v", err)
		}
	}
	time.Sleep(2 * time.Second)
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var last error
	for range 50 {
		if last = submit("after"); last == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if last != nil {
		t.Fatalf("submit after the database came back: %v", last)
	}
	if code, rd := readyz(t, h.URL); code != 200 || !rd.Ready {
		t.Fatalf("readyz once the database is back: %d %+v", code, rd)
	}
	js, err := s.List(ctx, ListFilter{})
	if err != nil || len(js) != 2 {
		t.Fatalf("jobs after the outage: %d %v (want before and after only)", len(js), err)
	}
	u, _ := s.inner.Usage(ctx)
	if len(u) != 1 || u[0].Queued != 2 {
		t.Fatalf("counters after the outage: %+v", u)
	}
}

// readyz reads url's GET /readyz.
func readyz(t *testing.T, url string) (int, controlapi.Readiness) {
	t.Helper()
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rd controlapi.Readiness
	if err := json.NewDecoder(resp.Body).Decode(&rd); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, rd
}
