package sign

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	intoto "github.com/in-toto/attestation/go/v1"
	ctypes "github.com/sigstore/cosign/v2/pkg/types"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	sigopts "github.com/sigstore/sigstore/pkg/signature/options"

	"github.com/slipway-dev/slipway/pkg/release/attest"
)

// SignEnvelope signs an in-toto statement into a DSSE envelope (payload
// type application/vnd.in-toto+json) that is kept outside a registry: a
// rollout's evidence in the config repository. Like Attest, it checks its
// own output before returning it.
func SignEnvelope(ctx context.Context, sv signature.SignerVerifier, statement []byte) ([]byte, error) {
	if sv == nil {
		return nil, fmt.Errorf("%w: no signer", ErrInput)
	}
	if _, err := attest.Parse(statement); err != nil {
		return nil, fmt.Errorf("%w: statement: %w", ErrInput, err)
	}
	env, err := dsse.WrapSigner(sv, ctypes.IntotoPayloadType).SignMessage(bytes.NewReader(statement), sigopts.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("sign: sign statement: %w", err)
	}
	if _, err := VerifyEnvelope(ctx, sv, env); err != nil {
		return nil, fmt.Errorf("sign: self-check: %w", err)
	}
	return env, nil
}

// VerifyEnvelope checks a DSSE envelope made by SignEnvelope with v and
// returns the statement it carries (protojson names, as signed). A
// wrong key, a changed payload or another payload type is ErrVerification.
func VerifyEnvelope(ctx context.Context, v signature.Verifier, env []byte) (*intoto.Statement, error) {
	if v == nil {
		return nil, fmt.Errorf("%w: no verifier", ErrInput)
	}
	var e struct {
		PayloadType string `json:"payloadType"`
		Payload     []byte `json:"payload"`
	}
	if err := json.Unmarshal(env, &e); err != nil {
		return nil, fmt.Errorf("%w: not a DSSE envelope: %v", ErrVerification, err)
	}
	if e.PayloadType != ctypes.IntotoPayloadType {
		return nil, fmt.Errorf("%w: payload type %q, want %q", ErrVerification, e.PayloadType, ctypes.IntotoPayloadType)
	}
	if err := dsse.WrapVerifier(v).VerifySignature(bytes.NewReader(env), nil, sigopts.WithContext(ctx)); err != nil {
		return nil, errors.Join(ErrVerification, err)
	}
	st, err := attest.Parse(e.Payload)
	if err != nil {
		return nil, fmt.Errorf("%w: payload: %w", ErrVerification, err)
	}
	return st, nil
}
