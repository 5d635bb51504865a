package gitops

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// packWindow is how many objects the pack encoder compares for deltas
// (git's and go-git's default).
const packWindow = 10

// push sends commit to branch with objects (the commit and what the edit
// wrote), never forcing: a tracked branch must still be at base
// (compare-and-swap, checked again by the server, which updates the branch
// only from the old value it is sent), any other branch must be new or
// move forward.
//
// The edit knows which objects are new, so they are all that is packed.
// go-git's Push works them out by walking every object reachable from the
// remote's branches that the store holds (the whole tree of the head:
// every folder of the repository, read back from the store) to subtract it;
// that costs as much as the repository is large, not as the edit.
func (r *Repo) push(ctx context.Context, commit plumbing.Hash, objects []plumbing.Hash, branch string, tracked bool, base plumbing.Hash) error {
	cl, ep, err := r.client()
	if err != nil {
		return err
	}
	sess, err := cl.NewReceivePackSession(ep, r.auth())
	if err != nil {
		return err
	}
	defer sess.Close()
	adv, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return err
	}
	refs, err := adv.AllReferences()
	if err != nil {
		return err
	}
	name := plumbing.NewBranchReferenceName(branch)
	var old plumbing.Hash
	if ref, err := refs.Reference(name); err == nil {
		old = ref.Hash()
	} else if !errors.Is(err, plumbing.ErrReferenceNotFound) {
		return err
	}
	switch {
	case old == commit:
		return r.pushed(name, commit) // already there
	case tracked && !base.IsZero() && old != base:
		return fmt.Errorf("remote ref %s required to be %s but is %s", name, base, old)
	case !old.IsZero() && !r.isAncestor(old, commit):
		return fmt.Errorf("non-fast-forward update: %s", name)
	}
	objects = unique(objects) // the same content written twice is one object
	req := packp.NewReferenceUpdateRequestFromCapabilities(adv.Capabilities)
	req.Commands = []*packp.Command{{Name: name, Old: old, New: commit}}
	rd, wr := io.Pipe()
	req.Packfile = rd
	done := make(chan error, 1) // buffered: the encoder never blocks on it
	go func() {
		enc := packfile.NewEncoder(wr, r.repo.Storer, !adv.Capabilities.Supports(capability.OFSDelta))
		_, err := enc.Encode(objects, packWindow)
		done <- err
		wr.CloseWithError(err)
	}()
	rs, err := sess.ReceivePack(ctx, req)
	if err != nil {
		rd.Close() // unblocks the encoder
		return err
	}
	if err := <-done; err != nil {
		return err
	}
	if rs != nil {
		if err := rs.Error(); err != nil {
			return err
		}
	}
	return r.pushed(name, commit)
}

// pushed records that the remote's branch is at commit, as a fetch would:
// the next fetch names it as a have.
func (r *Repo) pushed(branch plumbing.ReferenceName, commit plumbing.Hash) error {
	remoteRef := plumbing.NewRemoteReferenceName("origin", branch.Short())
	return r.repo.Storer.SetReference(plumbing.NewHashReference(remoteRef, commit))
}

// isAncestor reports whether old is commit or one of its ancestors in the
// store (a shallow store answers for the history it holds).
func (r *Repo) isAncestor(old, commit plumbing.Hash) bool {
	c, err := object.GetCommit(r.repo.Storer, commit)
	if err != nil {
		return false
	}
	found := false
	_ = object.NewCommitPreorderIter(c, nil, nil).ForEach(func(c *object.Commit) error {
		if c.Hash == old {
			found = true
			return storer.ErrStop
		}
		return nil
	})
	return found
}

func unique(hs []plumbing.Hash) []plumbing.Hash {
	seen := make(map[plumbing.Hash]bool, len(hs))
	out := hs[:0:0]
	for _, h := range hs {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}
