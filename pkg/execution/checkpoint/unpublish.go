package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// Unpublished is one checkpoint CollectPublished deleted from a registry
// repository (in a dry run: would delete).
type Unpublished struct {
	// Ref is the checkpoint in the repository, by digest.
	Ref        string    `json:"ref"`
	Checkpoint string    `json:"checkpoint"`
	Predicate  Predicate `json:"predicate"`
	// Manifest, Signature and Attestation are what the registry deleted:
	// the checkpoint's manifest and those of its .sig and .att tags, by
	// digest ("" for what was already gone, and in a dry run).
	Manifest    string `json:"manifest,omitempty"`
	Signature   string `json:"signature,omitempty"`
	Attestation string `json:"attestation,omitempty"`
}

// Unjudged is a checkpoint CollectPublished found in a repository and left
// alone, with why.
type Unjudged struct {
	Ref string `json:"ref"`
	Why string `json:"why"`
}

// CollectedPublished says what CollectPublished deleted from a repository
// and kept.
type CollectedPublished struct {
	Repository string        `json:"repository"`
	Deleted    []Unpublished `json:"deleted"`
	// Kept counts the checkpoints left: inside their window, or kept.
	Kept int `json:"kept"`
	// Unjudged are the checkpoints the repository holds that are not
	// known to be the verifier's: left alone.
	Unjudged []Unjudged `json:"unjudged,omitempty"`
}

// signedTag is the tag cosign gives a digest's signature or attestation.
var signedTag = regexp.MustCompile(`^sha256-([0-9a-f]{64})\.(sig|att)$`)

// CollectPublished deletes from the registry repository repo the
// checkpoints whose restore window has closed (closed says so, as for
// CollectClosed) and that keep does not name (a run's head), each with its
// signature and attestation (sign.Delete); never one inside its window or
// kept. With dryRun nothing is deleted and the answer says what would be.
//
// It looks at the checkpoints repo has a signature or attestation tag of
// (cosign's sha256-<hex>.sig and .att, which Push writes), and at those of
// local (a store's List, taken before that store's own Collect) that repo
// holds, signed or not (a Push that stopped before it signed). One of local
// is judged by local's predicate (the same digest is the same config); one
// only in repo by its own, once its signature and attestation verify with
// v: one that does not (another key's, or damaged) is left alone and listed
// in Unjudged. The layers are blobs, which the registry's own garbage
// collection removes once no manifest lists them, so a layer a kept
// checkpoint shares stays. The registry must allow deletes; a delete that
// stops halfway is finished by the next call.
func CollectPublished(ctx context.Context, repo name.Repository, v signature.Verifier, local []Checkpoint, closed func(Predicate) bool, keep map[string]bool, dryRun bool, opts ...Option) (*CollectedPublished, error) {
	o, err := makeOptions(opts)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("%w: no verifier", ErrInput)
	}
	ro := append([]remote.Option{remote.WithContext(ctx)}, o.remote...)
	tags, err := remote.List(repo, ro...)
	if err != nil && !notFound(err) { // a repository never pushed to has no tags
		return nil, fmt.Errorf("checkpoint: list the tags of %s: %w", repo, err)
	}
	signed := map[string]bool{}
	for _, t := range tags {
		if m := signedTag.FindStringSubmatch(t); m != nil {
			signed["sha256:"+m[1]] = true
		}
	}
	known := map[string]Predicate{}
	var order []string
	for _, c := range local {
		if _, ok := known[c.Digest]; !ok {
			known[c.Digest] = c.Predicate
			order = append(order, c.Digest)
		}
	}
	var only []string
	for d := range signed {
		if _, ok := known[d]; !ok {
			only = append(only, d)
		}
	}
	slices.Sort(only)
	order = append(order, only...)

	out := &CollectedPublished{Repository: repo.String(), Deleted: []Unpublished{}}
	for _, d := range order {
		h, err := v1.NewHash(d)
		if err != nil {
			return out, fmt.Errorf("%w: checkpoint id %q: %v", ErrInput, d, err)
		}
		ref := repo.Digest(d)
		pred, ok := known[d]
		if ok && !signed[d] {
			// Not signed there: pushed halfway, or never pushed.
			if _, err := remote.Head(ref, ro...); notFound(err) {
				continue
			} else if err != nil {
				return out, fmt.Errorf("checkpoint: look for %s: %w", ref, err)
			}
		}
		if !ok {
			pub, err := readPublished(ctx, ref, h, v, o)
			if errors.Is(err, ErrRefused) {
				out.Unjudged = append(out.Unjudged, Unjudged{Ref: ref.String(), Why: err.Error()})
				continue
			}
			if err != nil {
				return out, err
			}
			pred = *pub.pred
		}
		if !closed(pred) || keep[d] {
			out.Kept++
			continue
		}
		u := Unpublished{Ref: ref.String(), Checkpoint: d, Predicate: pred}
		if !dryRun {
			del, err := sign.Delete(ctx, ref, o.sign...)
			if err != nil {
				return out, fmt.Errorf("checkpoint: delete %s: %w", ref, err)
			}
			u.Manifest, u.Signature, u.Attestation = del.Image, del.Signatures, del.Attestations
			if u.Manifest == "" && u.Signature == "" && u.Attestation == "" {
				continue // gone meanwhile (another sweep): nothing deleted here
			}
		}
		out.Deleted = append(out.Deleted, u)
	}
	return out, nil
}

func notFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}
