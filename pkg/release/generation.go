package release

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/pkg/api/runnermeta"
	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
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
	// Remote are the registry options CreateGeneration reads image
	// configs with (default: the default keychain).
	Remote []remote.Option
}

// imageKinds say, by pin kind, which label of its config makes an image one
// of that kind, and what makes such an image.
var imageKinds = map[generation.Kind]struct{ label, what, made string }{
	generation.Runner:            {runnermeta.LabelSHA256, "a runner image", "slipway image runner"},
	generation.WorkspaceTemplate: {templatemeta.LabelSpecDigest, "a workspace template image", "slipway template build"},
}

// checkImageKinds refuses a runner pin whose image is not a runner image and
// a template pin that is not a template image: their config labels say what
// they are. The error names the pin (ErrRefused).
func checkImageKinds(ctx context.Context, g *generation.Generation, opts ...remote.Option) error {
	kinds := make([]generation.Kind, 0, len(imageKinds))
	for k := range imageKinds {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	if len(opts) == 0 {
		opts = []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	}
	for _, k := range kinds {
		p, ok := g.Pins[k]
		if !ok || p.Image == "" {
			continue
		}
		want := imageKinds[k]
		r, err := name.ParseReference(p.Image)
		if err != nil {
			return fmt.Errorf("release: pin %s %s: %w", k, p.Image, err)
		}
		img, err := remote.Image(r, append(opts, remote.WithContext(ctx))...)
		if err != nil {
			return fmt.Errorf("release: pin %s %s: reading its config: %w", k, p.Image, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return fmt.Errorf("release: pin %s %s: reading its config: %w", k, p.Image, err)
		}
		if _, ok := cf.Config.Labels[want.label]; !ok {
			return fmt.Errorf("%w: pin %s %s is not %s: its config has no %s label (%s makes one)", ErrRefused, k, p.Image, want.what, want.label, want.made)
		}
	}
	return nil
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
	if n.Verify.Policy != nil {
		if err := checkImageKinds(ctx, g, n.Verify.Remote...); err != nil {
			return nil, err
		}
	}
	if g.ID, err = generation.ComputeID(g); err != nil {
		return nil, err
	}
	return g, nil
}
