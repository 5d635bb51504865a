package sign_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

func TestEnvelope(t *testing.T) {
	ctx := context.Background()
	sv, other := newKeys(t, "pw").sv, newKeys(t, "pw").sv
	st, err := attest.New("agents/g-1", "sha256:"+strings.Repeat("a", 64), "https://slipway.dev/rollout-evidence/v1", []byte(`{"checks":[{"check":"allocate","passed":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := attest.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	env, err := sign.SignEnvelope(ctx, sv, b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sign.VerifyEnvelope(ctx, sv, env)
	if err != nil || got.GetPredicateType() != "https://slipway.dev/rollout-evidence/v1" {
		t.Fatalf("verify: %v %v", got, err)
	}
	if _, err := sign.VerifyEnvelope(ctx, other, env); !errors.Is(err, sign.ErrVerification) {
		t.Errorf("another key: %v", err)
	}
	// A changed payload (passed → failed, same length) no longer verifies.
	var e map[string]any
	json.Unmarshal(env, &e)
	pb, _ := json.Marshal(bytes.Replace(b, []byte(`"passed":true`), []byte(`"passed":fals`), 1))
	e["payload"] = json.RawMessage(pb)
	tampered, _ := json.Marshal(e)
	if _, err := sign.VerifyEnvelope(ctx, sv, tampered); !errors.Is(err, sign.ErrVerification) {
		t.Errorf("tampered: %v", err)
	}
	if _, err := sign.SignEnvelope(ctx, sv, []byte(`{"not":"a statement"}`)); !errors.Is(err, sign.ErrInput) {
		t.Errorf("not a statement: %v", err)
	}
}
