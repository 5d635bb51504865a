package gitops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
)

// fetch brings the head of branch into the store and returns it (zero for
// a branch, or a repository, that does not exist yet). The first fetch
// into a store takes the configured depth; once the store holds a head of
// the branch (a cache folder, or a retry after a lost race), later fetches
// bring only what is new since then.
func (r *Repo) fetch(ctx context.Context, branch string) (plumbing.Hash, error) {
	remoteRef := plumbing.NewRemoteReferenceName("origin", branch)
	if ref, err := r.repo.Storer.Reference(remoteRef); err == nil && r.hasCommit(ref.Hash()) {
		return r.fetchSince(ctx, branch, remoteRef)
	}
	err := r.repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: "origin",
		RefSpecs:   []config.RefSpec{config.RefSpec("+refs/heads/" + branch + ":" + remoteRef.String())},
		Depth:      r.o.depth,
		Auth:       r.auth(),
		Tags:       git.NoTags,
		Force:      true,
	})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
	case errors.Is(err, transport.ErrEmptyRemoteRepository), isNoMatchingRef(err):
		_ = r.repo.Storer.RemoveReference(remoteRef)
		return plumbing.ZeroHash, nil
	default:
		return plumbing.ZeroHash, r.fetchError(branch, err)
	}
	ref, err := r.repo.Reference(remoteRef, true)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("gitops: %s: %s: %w", r.display, remoteRef, err)
	}
	return ref.Hash(), nil
}

func (r *Repo) fetchError(branch string, err error) error {
	if errors.Is(err, transport.ErrRepositoryNotFound) {
		err = redact(err, r.url)
		return &noRepositoryError{msg: fmt.Sprintf("%v at %s: fetch %s: %v", ErrNoRepository, r.display, branch, err), err: err}
	}
	return fmt.Errorf("%w: %s: fetch %s: %w%s", ErrRemote, r.display, branch, redact(err, r.url), r.authNote(err))
}

func isNoMatchingRef(err error) bool {
	var nm git.NoMatchingRefSpecError
	return errors.As(err, &nm) || strings.Contains(err.Error(), "couldn't find remote ref")
}

// client is the transport for the remote (what go-git's Fetch and Push
// use underneath).
func (r *Repo) client() (transport.Transport, *transport.Endpoint, error) {
	ep, err := transport.NewEndpoint(r.url)
	if err != nil {
		return nil, nil, err
	}
	cl, err := client.NewClient(ep)
	if err != nil {
		return nil, nil, err
	}
	return cl, ep, nil
}

func (r *Repo) hasCommit(h plumbing.Hash) bool {
	_, err := r.repo.Storer.EncodedObject(plumbing.CommitObject, h)
	return err == nil
}

// fetchSince fetches branch into a store that already holds an earlier head
// of it, as `git fetch` does in a shallow clone: it names the store's heads
// as haves and its shallow commits as shallow, and does not deepen, so the
// server sends only the commits since those heads and the objects they add.
//
// go-git's Fetch cannot do this. With a depth, the server cuts the history
// at the new head, so nothing the store has can be subtracted without a
// thin pack, which go-git does not ask for: it sends the whole tree again
// (every file of the repository, for a one-line change). Without a depth,
// go-git does not send the shallow commits, and the server would assume
// that the store holds their ancestors too.
func (r *Repo) fetchSince(ctx context.Context, branch string, remoteRef plumbing.ReferenceName) (plumbing.Hash, error) {
	cl, ep, err := r.client()
	if err != nil {
		return plumbing.ZeroHash, r.fetchError(branch, err)
	}
	sess, err := cl.NewUploadPackSession(ep, r.auth())
	if err != nil {
		return plumbing.ZeroHash, r.fetchError(branch, err)
	}
	defer sess.Close()
	adv, err := sess.AdvertisedReferencesContext(ctx)
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		_ = r.repo.Storer.RemoveReference(remoteRef)
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, r.fetchError(branch, err)
	}
	refs, err := adv.AllReferences()
	if err != nil {
		return plumbing.ZeroHash, r.fetchError(branch, err)
	}
	head, err := refs.Reference(plumbing.NewBranchReferenceName(branch))
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		_ = r.repo.Storer.RemoveReference(remoteRef)
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, r.fetchError(branch, err)
	}
	want := head.Hash()
	if !r.hasCommit(want) {
		if err := r.fetchPack(ctx, sess, adv, want); err != nil {
			return plumbing.ZeroHash, r.fetchError(branch, err)
		}
	}
	if err := r.repo.Storer.SetReference(plumbing.NewHashReference(remoteRef, want)); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("gitops: %s: %s: %w", r.display, remoteRef, err)
	}
	return want, nil
}

// fetchPack asks for want, naming what the store has, and stores the pack.
func (r *Repo) fetchPack(ctx context.Context, sess transport.UploadPackSession, adv *packp.AdvRefs, want plumbing.Hash) error {
	req := packp.NewUploadPackRequestFromCapabilities(adv.Capabilities)
	req.Wants = []plumbing.Hash{want}
	haves, err := r.heads()
	if err != nil {
		return err
	}
	req.Haves = haves
	if req.Shallows, err = r.repo.Storer.Shallow(); err != nil {
		return err
	}
	if len(req.Shallows) > 0 {
		if !adv.Capabilities.Supports(capability.Shallow) {
			return fmt.Errorf("the server does not support shallow clones")
		}
		if err := req.Capabilities.Set(capability.Shallow); err != nil {
			return err
		}
	}
	if adv.Capabilities.Supports(capability.NoProgress) {
		if err := req.Capabilities.Set(capability.NoProgress); err != nil {
			return err
		}
	}
	resp, err := sess.UploadPack(ctx, req)
	if err != nil {
		return err
	}
	defer resp.Close()
	var pack io.Reader = resp
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		pack = sideband.NewDemuxer(sideband.Sideband64k, resp)
	case req.Capabilities.Supports(capability.Sideband):
		pack = sideband.NewDemuxer(sideband.Sideband, resp)
	}
	if err := packfile.UpdateObjectStorage(r.repo.Storer, pack); err != nil && !errors.Is(err, packfile.ErrEmptyPackfile) {
		return err
	}
	if !r.hasCommit(want) {
		return fmt.Errorf("the server's pack lacks %s", want)
	}
	return nil
}

// heads lists the commits the remote-tracking branches of the store point
// at: what the server need not send again.
func (r *Repo) heads() ([]plumbing.Hash, error) {
	iter, err := r.repo.Storer.IterReferences()
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	seen := map[plumbing.Hash]bool{}
	var out []plumbing.Hash
	err = iter.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() == plumbing.HashReference && ref.Name().IsRemote() && !seen[ref.Hash()] && r.hasCommit(ref.Hash()) {
			seen[ref.Hash()] = true
			out = append(out, ref.Hash())
		}
		return nil
	})
	if err != nil && !errors.Is(err, storer.ErrStop) {
		return nil, err
	}
	return out, nil
}
