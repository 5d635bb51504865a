package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// GCOptions says what GC looks at and whether it deletes.
type GCOptions struct {
	Repo   *gitops.Repo
	Branch string
	// Pools limits the generations whose artifacts may be deleted (all
	// pools when empty); references are counted across every pool.
	Pools []string
	// Delete deletes; without it GC only lists (a dry run).
	Delete bool
	Author gitops.Signature
	Now    func() time.Time
	// SignOptions reach the registry (keychain, transport).
	SignOptions []sign.Option
}

// Artifact is one image GC deletes, or would.
type Artifact struct {
	Pool       string `json:"pool"`
	Generation string `json:"generation"`
	Kind       string `json:"kind"`
	Image      string `json:"image"`
	// WindowsClosed is when the later of the rollback and restore windows
	// closed.
	WindowsClosed time.Time     `json:"windowsClosed"`
	Deleted       *sign.Deleted `json:"deleted,omitempty"`
}

// Kept is a retained generation GC keeps, and why.
type Kept struct {
	Pool       string `json:"pool"`
	Generation string `json:"generation"`
	Reason     string `json:"reason"`
}

// GCReport is what GC found and did.
type GCReport struct {
	Revision  string     `json:"revision"`
	DryRun    bool       `json:"dryRun"`
	Artifacts []Artifact `json:"artifacts"`
	Kept      []Kept     `json:"kept"`
	// Removed lists the generations taken out of their pool's state
	// (their artifacts are gone); Commit is that commit.
	Removed []string `json:"removed,omitempty"`
	Commit  string   `json:"commit,omitempty"`
}

// GC lists, and with Delete deletes, the image artifacts of retained
// generations whose rollback and restore windows have both closed, unless
// any other generation of any pool still pins them (active, warming,
// draining, retained within its windows, a target, or a generation that
// was never rolled out). Each image goes with its signatures and
// attestations; the generations whose artifacts are all gone then leave
// their pool's state in one commit (their documents stay, as history).
func GC(ctx context.Context, o GCOptions) (*GCReport, error) {
	if o.Branch == "" {
		o.Branch = "main"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	now := o.Now()
	t, head, err := o.Repo.Snapshot(ctx, o.Branch)
	if err != nil {
		return nil, err
	}
	names, err := t.List("pools")
	if err != nil && !errors.Is(err, gitops.ErrNotExist) {
		return nil, err
	}
	for _, p := range o.Pools {
		if !slices.Contains(names, p) {
			return nil, fmt.Errorf("%w: the config repository has no pool %s", ErrRefused, p)
		}
	}
	rep := &GCReport{Revision: head, DryRun: !o.Delete, Artifacts: []Artifact{}, Kept: []Kept{}}
	type expiredGen struct {
		pool   string
		g      *generation.Generation
		closed time.Time
	}
	var expired []expiredGen
	referenced := map[string]bool{} // image identity (digest) → pinned by a generation kept
	for _, pn := range names {
		v, err := readView(t, pn)
		if err != nil {
			continue // not a pool folder
		}
		windows := max(v.pool.Spec.RollbackWindow.Duration, v.pool.Spec.RestoreWindow.Duration)
		states := map[string]pool.GenState{}
		for _, e := range v.state.Generations {
			states[e.ID] = e
		}
		files, err := t.List(pool.GenerationsDir(pn))
		if err != nil && !errors.Is(err, gitops.ErrNotExist) {
			return nil, err
		}
		for _, f := range files {
			id, ok := strings.CutSuffix(f, ".yaml")
			if !ok {
				continue
			}
			g, err := v.generationOf(id)
			if err != nil {
				return nil, err
			}
			e, inState := states[id]
			closed := e.Since.Add(windows)
			mine := len(o.Pools) == 0 || slices.Contains(o.Pools, pn)
			switch {
			case inState && e.State == pool.Retained && !now.Before(closed) && id != v.state.Target && mine:
				expired = append(expired, expiredGen{pn, g, closed})
				continue
			case inState && e.State == pool.Retained && mine:
				rep.Kept = append(rep.Kept, Kept{pn, id, fmt.Sprintf("retained: its windows close at %s", closed.Format(time.RFC3339))})
			}
			for _, p := range g.Pins {
				if p.Form() == generation.FormImage {
					referenced[p.Identity()+" "+repoOf(p.Image)] = true
				}
			}
		}
	}
	for _, x := range expired {
		kinds := make([]string, 0, len(x.g.Pins))
		for k := range x.g.Pins {
			kinds = append(kinds, string(k))
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			p := x.g.Pins[generation.Kind(k)]
			if p.Form() != generation.FormImage {
				continue
			}
			if referenced[p.Identity()+" "+repoOf(p.Image)] {
				rep.Kept = append(rep.Kept, Kept{x.pool, x.g.ID, fmt.Sprintf("%s %s is still pinned by a generation in use", k, p.Image)})
				continue
			}
			rep.Artifacts = append(rep.Artifacts, Artifact{Pool: x.pool, Generation: x.g.ID, Kind: k, Image: p.Image, WindowsClosed: x.closed})
		}
	}
	if !o.Delete {
		return rep, nil
	}
	done := map[string]bool{}
	for i := range rep.Artifacts {
		a := &rep.Artifacts[i]
		d, err := name.NewDigest(a.Image)
		if err != nil {
			return rep, fmt.Errorf("rollout: gc: %s of %s: %w", a.Image, a.Generation, err)
		}
		if key := d.String(); done[key] {
			continue
		} else {
			done[key] = true
		}
		if a.Deleted, err = sign.Delete(ctx, d, o.SignOptions...); err != nil {
			return rep, fmt.Errorf("rollout: gc: %w", err)
		}
	}
	// Every artifact of these generations is gone: they leave the state.
	gone := map[string][]string{}
	for _, x := range expired {
		gone[x.pool] = append(gone[x.pool], x.g.ID)
		rep.Removed = append(rep.Removed, x.g.ID)
	}
	if len(gone) == 0 {
		return rep, nil
	}
	res, err := o.Repo.Update(ctx, gitops.Request{Branch: o.Branch, Author: o.Author, Edit: func(t *gitops.Tree) (*gitops.Commit, error) {
		var pools []string
		for pn, ids := range gone {
			v, err := readView(t, pn)
			if err != nil {
				return nil, err
			}
			v.state.Generations = slices.DeleteFunc(v.state.Generations, func(e pool.GenState) bool {
				return slices.Contains(ids, e.ID) && e.State == pool.Retained
			})
			b, err := pool.Marshal(v.state)
			if err != nil {
				return nil, err
			}
			if err := t.WriteFile(pool.StateFile(pn), b); err != nil {
				return nil, err
			}
			pools = append(pools, pn)
		}
		sort.Strings(pools)
		return &gitops.Commit{Subject: fmt.Sprintf("gc: %d generations past their windows leave %s", len(rep.Removed), strings.Join(pools, ", ")),
			Body:     "Deleted with their signatures and attestations:\n" + artifactList(rep.Artifacts),
			Trailers: []gitops.Trailer{{Key: "Slipway-Pool", Value: strings.Join(pools, ",")}, {Key: "Slipway-Step", Value: "gc"}}}, nil
	}})
	if err != nil {
		return rep, err
	}
	rep.Commit = res.Commit
	return rep, nil
}

func artifactList(as []Artifact) string {
	var b strings.Builder
	for _, a := range as {
		fmt.Fprintf(&b, "  %s %s %s\n", a.Generation, a.Kind, a.Image)
	}
	return b.String()
}

// repoOf is the repository part of an image reference.
func repoOf(image string) string {
	if d, err := name.NewDigest(image); err == nil {
		return d.Context().Name()
	}
	return image
}
