package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

func TestTokens(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		text, tok, err := s.CreateToken(ctx, "acme", controlapi.ScopeTenant, "ci")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(text, "swt_"+tok.ID+"_") {
			t.Fatalf("token text %q does not name id %s", text, tok.ID)
		}
		got, err := s.inner.Authenticate(ctx, text)
		if err != nil || got.Tenant != "acme" || got.Scope != controlapi.ScopeTenant {
			t.Fatalf("Authenticate = %+v, %v", got, err)
		}
		wrong := text[:len(text)-1] + "a"
		if strings.HasSuffix(text, "a") {
			wrong = text[:len(text)-1] + "b"
		}
		for _, bad := range []string{wrong, "", "swt_", "swt_" + tok.ID, "Bearer " + text, text + "x"} {
			if _, err := s.inner.Authenticate(ctx, bad); !errors.Is(err, ErrUnauthenticated) {
				t.Errorf("Authenticate(%q) = %v, want ErrUnauthenticated", bad, err)
			}
		}
		ts, err := s.ListTokens(ctx, "acme")
		if err != nil || len(ts) != 1 || ts[0].ID != tok.ID {
			t.Fatalf("ListTokens = %+v, %v", ts, err)
		}
		if fmt.Sprintf("%+v", ts) != "" && strings.Contains(fmt.Sprintf("%+v", ts), text[len(text)-32:]) {
			t.Fatal("ListTokens shows the secret")
		}
		if err := s.RevokeToken(ctx, tok.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.inner.Authenticate(ctx, text); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("revoked token authenticates: %v", err)
		}
		if err := s.RevokeToken(ctx, tok.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second revoke: %v", err)
		}
		if _, _, err := s.CreateToken(ctx, "Acme!", controlapi.ScopeTenant, ""); err == nil {
			t.Fatal("bad tenant name accepted")
		}
	})
}
