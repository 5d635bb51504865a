package runtime_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/runtime"
)

// The broker's check names why a token is refused (expired, revoked,
// unknown) by fingerprint and secret version, never by value.
func TestBrokerCheck(t *testing.T) {
	b, err := runtime.NewBroker(runtime.LocalIssuer, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	tok, rc, err := b.Issue("r-1", "vault://kv/agents/api-key#4")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Check(string(tok)); err != nil || !b.Valid(string(tok)) {
		t.Fatalf("a fresh token: %v", err)
	}
	other, rc2, _ := b.Issue("r-2", "vault://kv/agents/api-key#4")
	if at := b.Revoke(rc2.SHA256Fingerprint); at.IsZero() || b.Revoke(rc2.SHA256Fingerprint) != at {
		t.Fatalf("revoke: %v (repeat-safe, the first time kept)", at)
	}
	time.Sleep(400 * time.Millisecond)
	for _, c := range []struct {
		token string
		want  error
		words []string
	}{
		{string(tok), runtime.ErrCredentialExpired, []string{rc.SHA256Fingerprint, "vault://kv/agents/api-key#4", "r-1", "expired at"}},
		{string(other), runtime.ErrCredentialRevoked, []string{rc2.SHA256Fingerprint, "r-2", "revoked at"}},
		{"swt_never-issued", runtime.ErrCredentialUnknown, []string{runtime.Fingerprint([]byte("swt_never-issued")), "not issued by"}},
	} {
		err := b.Check(c.token)
		if !errors.Is(err, c.want) || !errors.Is(err, runtime.ErrCredentials) || strings.Contains(err.Error(), c.token) {
			t.Errorf("check: %v, want %v without the token", err, c.want)
			continue
		}
		for _, w := range c.words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v lacks %q", err, w)
			}
		}
	}
}
