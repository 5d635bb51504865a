package control

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
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
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
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
	js, err := s.List(ctx, ListFilter{})
	if err != nil || len(js) != 2 {
		t.Fatalf("jobs after the outage: %d %v (want before and after only)", len(js), err)
	}
	u, _ := s.inner.Usage(ctx)
	if len(u) != 1 || u[0].Queued != 2 {
		t.Fatalf("counters after the outage: %+v", u)
	}
}
