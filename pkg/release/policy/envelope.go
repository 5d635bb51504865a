package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	intoto "github.com/in-toto/attestation/go/v1"

	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// ErrUntrusted marks a DSSE envelope that no key of the policy verifies:
// signed by another key, or changed after signing.
var ErrUntrusted = errors.New("signed by no key of the verification policy")

// VerifyEnvelope checks a DSSE envelope kept outside a registry (a
// rollout's evidence, sign.SignEnvelope's output) against every key of
// the policy and returns the statement it carries and the name of the key
// that verified it. No key verifying it is an error wrapping ErrUntrusted
// and sign.ErrVerification that names the keys tried.
func (p *Policy) VerifyEnvelope(ctx context.Context, env []byte) (*intoto.Statement, string, error) {
	if len(p.Spec.Keys) == 0 {
		return nil, "", fmt.Errorf("%w: policy %s has no keys", ErrUntrusted, p.Metadata.Name)
	}
	var names []string
	var last error
	for _, k := range p.Spec.Keys {
		st, err := sign.VerifyEnvelope(ctx, p.verifiers[k.Name], env)
		if err == nil {
			return st, k.Name, nil
		}
		if !errors.Is(err, sign.ErrVerification) {
			return nil, "", err
		}
		names, last = append(names, k.Name), err
	}
	return nil, "", fmt.Errorf("%w (policy %s, keys %s): %w", ErrUntrusted, p.Metadata.Name, strings.Join(names, ", "), last)
}
