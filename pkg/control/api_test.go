package control

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

func TestAPI(t *testing.T) {
	repo := configRepo(t)
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		p := newPlane(t, s, repo, 8)
		srv := httptest.NewServer(NewServer(p))
		defer srv.Close()
		acmeTok, _, _ := s.CreateToken(ctx, "acme", controlapi.ScopeTenant, "")
		globexTok, _, _ := s.CreateToken(ctx, "globex", controlapi.ScopeTenant, "")
		opTok, _, _ := s.CreateToken(ctx, "ops", controlapi.ScopeOperator, "")
		acme, _ := controlapi.NewClient(srv.URL, acmeTok)
		globex, _ := controlapi.NewClient(srv.URL, globexTok)
		op, _ := controlapi.NewClient(srv.URL, opTok)

		raw := func(tok, method, path, body string, hdr ...string) (int, http.Header, string) {
			req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, resp.Header, string(b)
		}

		// A bad token: 401 and nothing else.
		for _, tok := range []string{"", "swt_nope", acmeTok + "x"} {
			code, _, body := raw(tok, "GET", "/v1/jobs", "")
			if code != 401 || strings.Contains(body, "acme") {
				t.Errorf("token %q: %d %s", tok, code, body)
			}
		}
		good := `{"pool":"agents","profile":"short","commands":[["true"]]}`
		for name, c := range map[string]struct {
			body string
			code int
			says string
		}{
			"unknown field":  {`{"pool":"agents","profile":"short","commands":[["true"]],"priority":9}`, 400, `unknown field`},
			"repeated field": {`{"pool":"agents","pool":"gpu","profile":"short","commands":[["true"]]}`, 400, "field pool appears twice"},
			"trailing data":  {good + `{}`, 400, "data after"},
			"oversize":       {`{"pool":"` + strings.Repeat("a", MaxBody) + `"}`, 413, "body over"},
			"not json":       {`pool=agents`, 400, "body"},
		} {
			code, _, body := raw(acmeTok, "POST", "/v1/jobs", c.body)
			if code != c.code || !strings.Contains(body, c.says) {
				t.Errorf("%s: %d %s", name, code, body)
			}
		}
		if js, _ := s.List(ctx, ListFilter{}); len(js) != 0 {
			t.Fatalf("bad requests stored %d jobs", len(js))
		}

		// The same key: the same job (201 then 200).
		code, h, body := raw(acmeTok, "POST", "/v1/jobs", good, "Idempotency-Key", "k1")
		if code != 201 || h.Get("Location") == "" {
			t.Fatalf("submit: %d %s", code, body)
		}
		if code, _, _ := raw(acmeTok, "POST", "/v1/jobs", good, "Idempotency-Key", "k1"); code != 200 {
			t.Fatalf("resubmit with the key: %d", code)
		}
		js, err := acme.List(ctx, "", 0)
		if err != nil || len(js) != 1 {
			t.Fatalf("acme's jobs: %d %v", len(js), err)
		}
		id := js[0].ID

		// Another tenant's job is 404, and not in its list.
		var ae *controlapi.APIError
		if _, err := globex.Get(ctx, id); !errors.As(err, &ae) || ae.Status != 404 {
			t.Fatalf("globex reads acme's job: %v", err)
		}
		if _, err := globex.Cancel(ctx, id); !errors.As(err, &ae) || ae.Status != 404 {
			t.Fatalf("globex cancels acme's job: %v", err)
		}
		if gl, _ := globex.List(ctx, "", 0); len(gl) != 0 {
			t.Fatalf("globex lists %d jobs", len(gl))
		}

		// The operator sees all, cannot submit, and is audited.
		if j, err := op.Get(ctx, id); err != nil || j.ID != id {
			t.Fatalf("operator: %v", err)
		}
		if _, _, err := op.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "short", Commands: cmd("true")}); !errors.As(err, &ae) || ae.Status != 403 {
			t.Fatalf("operator submit: %v", err)
		}
		if code, _, _ := raw(acmeTok, "GET", "/v1/audit", ""); code != 403 {
			t.Fatalf("tenant reads the audit log: %d", code)
		}
		log, err := s.inner.AuditLog(ctx, 10)
		if err != nil || len(log) < 2 || log[len(log)-1].Path != "/v1/jobs/"+id {
			t.Fatalf("audit log: %+v %v", log, err)
		}

		// Over the tenant's queue bound: 429 with Retry-After and the reason.
		for i := range 4 {
			if _, _, err := acme.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "short", Commands: cmd("true"), IdempotencyKey: "f" + string(rune('a'+i))}); err != nil {
				t.Fatal(err)
			}
		}
		code, h, body = raw(acmeTok, "POST", "/v1/jobs", good)
		if code != 429 || h.Get("Retry-After") == "" || !strings.Contains(body, "tenant_queue_full") {
			t.Fatalf("over the bound: %d %v %s", code, h, body)
		}
		// globex still submits.
		if _, _, err := globex.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true")}); err != nil {
			t.Fatalf("globex during acme's flood: %v", err)
		}

		// Cancel a queued job: canceled at once, with the reason and
		// the token that asked in its record.
		me, err := acme.WhoAmI(ctx)
		if err != nil || me.Tenant != "acme" || me.Scope != controlapi.ScopeTenant || me.TokenID == "" {
			t.Fatalf("whoami: %+v %v", me, err)
		}
		if code, _, body := raw(acmeTok, "POST", "/v1/jobs/"+id+"/cancel", `{"reason":"`+strings.Repeat("x", controlapi.MaxCancelReason+1)+`"}`); code != 400 || !strings.Contains(body, "reason") {
			t.Fatalf("an over-long reason: %d %s", code, body)
		}
		j, err := acme.CancelWithReason(ctx, id, "wrong pool <b>")
		if err != nil || j.State != controlapi.Canceled {
			t.Fatalf("cancel: %+v %v", j, err)
		}
		if c := j.Cancellation; c == nil || c.Reason != "wrong pool <b>" || c.RequestedBy != me.TokenID || !strings.Contains(c.Steps[0].Detail, "wrong pool") {
			t.Fatalf("cancellation record: %+v", j.Cancellation)
		}
		// A revoked token is refused at once.
		toks, _ := s.ListTokens(ctx, "globex")
		if err := s.RevokeToken(ctx, toks[0].ID); err != nil {
			t.Fatal(err)
		}
		if _, err := globex.List(ctx, "", 0); !errors.As(err, &ae) || ae.Status != 401 {
			t.Fatalf("revoked token: %v", err)
		}
	})
}

// TestRevokedElsewhere: a token revoked by another store on the same
// database (another replica, the CLI) is refused at the next submission,
// though the serving store authenticated it before and kept it: the
// storing transaction reads the revocation. Nothing is stored.
func TestRevokedElsewhere(t *testing.T) {
	repo := configRepo(t)
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		p := newPlane(t, s, repo, 8)
		srv := httptest.NewServer(NewServer(p))
		defer srv.Close()
		tok, tk, err := s.CreateToken(ctx, "globex", controlapi.ScopeTenant, "")
		if err != nil {
			t.Fatal(err)
		}
		c, _ := controlapi.NewClient(srv.URL, tok)
		submit := func(key string) error {
			_, _, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true"), IdempotencyKey: key})
			return err
		}
		for _, key := range []string{"k0", "k1"} { // the first reads the token live, the second from what was kept
			if err := submit(key); err != nil {
				t.Fatal(err)
			}
		}
		other, err := Open(ctx, s.inner.DSN())
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if err := other.RevokeToken(ctx, tk.ID); err != nil {
			t.Fatal(err)
		}
		var ae *controlapi.APIError
		for _, key := range []string{"k2", "k0"} { // a new key, and one that names a stored job
			if err := submit(key); !errors.As(err, &ae) || ae.Status != 401 {
				t.Fatalf("submit %s with a token revoked elsewhere: %v", key, err)
			}
		}
		if js, _ := s.List(ctx, ListFilter{}); len(js) != 2 {
			t.Fatalf("%d jobs stored, want the 2 before the revocation", len(js))
		}
	})
}
