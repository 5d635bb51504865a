package release

import (
	"context"
	"fmt"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

// ErrRefused marks an artifact the verification policy refused: nothing
// was written. The message names the pin and the failed checks.
var ErrRefused = policy.ErrRefused

// Verifier checks image pins before they are written anywhere. A nil
// Policy with Skip set is the visibly named --insecure-skip-verify.
type Verifier struct {
	Policy *policy.Policy
	Skip   bool
	// Options pass registry options to the policy (sessions, transports).
	Options []policy.Option
	// Now stamps the verification record (default time.Now).
	Now func() time.Time
}

// VerifyPins checks every image pin of g against the policy and returns
// the verification record to store in g (policy.VerifyGeneration).
func (v Verifier) VerifyPins(ctx context.Context, g *generation.Generation) (*generation.Verification, error) {
	if v.Policy == nil {
		if v.Skip {
			return nil, nil
		}
		return nil, fmt.Errorf("release: no verification policy: give one (or skip verification explicitly)")
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	return v.Policy.VerifyGeneration(ctx, g, now(), v.Options...)
}

// NewGeneration is what `slipway generation create` builds.
type NewGeneration struct {
	Pool     string
	From     *generation.Generation
	Pins     map[generation.Kind]generation.Pin
	Compat   *generation.Compatibility
	Required []generation.Kind
	Verify   Verifier
}

// CreateGeneration builds the generation (copying unchanged pins from
// From), checks the required kinds, and verifies every image pin against
// the policy before anything is written; the verification record goes into
// the generation.
func CreateGeneration(ctx context.Context, n NewGeneration) (*generation.Generation, error) {
	g, err := generation.New(n.Pool, n.From, n.Pins, n.Compat)
	if err != nil {
		return nil, err
	}
	if len(n.Required) > 0 {
		if err := g.Validate(n.Required); err != nil {
			return nil, err
		}
	}
	rec, err := n.Verify.VerifyPins(ctx, g)
	if err != nil {
		return nil, err
	}
	g.Verification = rec
	if g.ID, err = generation.ComputeID(g); err != nil {
		return nil, err
	}
	return g, nil
}
