package runtime

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// repository is the registry repository of cps ("" when none is set).
func (cps *Checkpoints) repository() (name.Repository, bool, error) {
	if cps.Repository == "" {
		return name.Repository{}, false, nil
	}
	repo, err := name.NewRepository(cps.Repository)
	if err != nil {
		return name.Repository{}, false, fmt.Errorf("checkpoint repository %q: %w", cps.Repository, err)
	}
	return repo, true, nil
}

// pushCheckpoint publishes the checkpoint digest to cps.Repository, by
// digest, signed and attested (checkpoint.Push); nothing without one.
func (r *Runtime) pushCheckpoint(ctx context.Context, cps *Checkpoints, digest string) error {
	repo, ok, err := cps.repository()
	if err != nil || !ok {
		return err
	}
	p, err := checkpoint.Push(ctx, cps.Store, digest, repo, cps.Signer, cps.registryOptions()...)
	if err != nil {
		return err
	}
	r.logf("runtime: checkpoint %s pushed as %s (signature %s, attestation %s)", digest, p.Ref, p.SignatureTag, p.AttestationTag)
	return nil
}

// fetchCheckpoint makes sure the store holds the checkpoint digest: one
// it lacks is pulled from cps.Repository, verified against exp before
// anything is written (checkpoint.Pull). Without a repository, or when
// the store has it, it does nothing: Verify says what is missing.
func (r *Runtime) fetchCheckpoint(ctx context.Context, cps *Checkpoints, digest string, exp checkpoint.Expect) error {
	repo, ok, err := cps.repository()
	if err != nil || !ok {
		return err
	}
	if cps.Store.Has(digest) {
		return nil // Verify, next, checks it
	}
	ref := repo.Digest(digest)
	if _, err := checkpoint.Pull(ctx, cps.Store, ref, cps.Verifier, exp, cps.registryOptions()...); err != nil {
		return fmt.Errorf("pull checkpoint %s: %w", ref, err)
	}
	r.logf("runtime: checkpoint %s pulled from %s, verified", digest, ref)
	return nil
}

// registryOptions reach the registry with cps.Keychain, for the
// checkpoint's blobs and its signatures alike.
func (cps *Checkpoints) registryOptions() []checkpoint.Option {
	kc := cps.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	return []checkpoint.Option{checkpoint.WithRemote(remote.WithAuthFromKeychain(kc)), checkpoint.WithSignOptions(sign.WithKeychain(kc))}
}
