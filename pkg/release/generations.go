package release

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
)

// GenerationEntry is one generation of a config repository: `slipway
// generation list`.
type GenerationEntry struct {
	ID       string `json:"id"`
	Pool     string `json:"pool"`
	Sequence int64  `json:"sequence"`
	// State is the generation's place in the pool's desired state (active,
	// warming, draining, retained), "target" for the promoted target not
	// rolled out yet, "" for a generation only stored.
	State string `json:"state,omitempty"`
	// Promoted is when it was last promoted (the pool's history; zero when
	// the history does not say).
	Promoted time.Time `json:"promoted,omitzero"`
	// Pins summarise the pins: kind, artifact, tag and identity.
	Pins []PinSummary `json:"pins"`
}

// PinSummary is one pin, short.
type PinSummary struct {
	Kind     generation.Kind `json:"kind"`
	Artifact string          `json:"artifact,omitempty"`
	Tag      string          `json:"tag,omitempty"`
	Identity string          `json:"identity"`
}

// Short is the pin as "kind tag@sha256:1a2b3c4d5e6f" (the identity cut to
// 12 digits).
func (p PinSummary) Short() string {
	id := p.Identity
	if algo, hex, ok := strings.Cut(id, ":"); ok && strings.HasPrefix(algo, "sha") && len(hex) > 12 {
		id = algo + ":" + hex[:12]
	} else if len(id) > 40 {
		id = id[:40] + "…"
	}
	if p.Tag != "" {
		return fmt.Sprintf("%s %s@%s", p.Kind, p.Tag, id)
	}
	return fmt.Sprintf("%s %s", p.Kind, id)
}

// GenerationList is the generations of a config repository at a revision.
type GenerationList struct {
	Revision    string            `json:"revision"`
	Generations []GenerationEntry `json:"generations"`
}

// ListGenerations reads the generations of pool poolName (of every pool
// when "") at the head of branch of repoURL, newest first in each pool.
func ListGenerations(ctx context.Context, repoURL, branch, poolName string, opts ...gitops.Option) (*GenerationList, error) {
	repo, t, rev, err := snapshot(ctx, repoURL, branch, opts)
	if err != nil {
		return nil, err
	}
	pools := []string{poolName}
	if poolName == "" {
		if pools, err = pool.Names(t.List); err != nil {
			return nil, err
		}
	}
	out := &GenerationList{Revision: rev, Generations: []GenerationEntry{}}
	for _, p := range pools {
		ids, err := pool.GenerationIDs(t.List, p)
		if err != nil {
			return nil, err
		}
		if len(ids) == 0 && poolName != "" && !t.Exists(pool.PoolFile(p)) {
			return nil, fmt.Errorf("release: %s holds no pool %s (slipway config init --pool %s seeds it)", repo.URL(), p, p)
		}
		st, err := pool.ReadState(p, t.ReadFile)
		if err != nil {
			return nil, err
		}
		var entries []GenerationEntry
		for _, id := range ids {
			g, err := readGeneration(t, p, id)
			if err != nil {
				return nil, err
			}
			entries = append(entries, entry(g, st))
		}
		sort.SliceStable(entries, func(i, j int) bool { return entries[i].Sequence > entries[j].Sequence })
		out.Generations = append(out.Generations, entries...)
	}
	return out, nil
}

func entry(g *generation.Generation, st *pool.State) GenerationEntry {
	e := GenerationEntry{ID: g.ID, Pool: g.Pool, Sequence: g.Sequence, Pins: []PinSummary{}}
	for _, k := range generation.Kinds() {
		if p, ok := g.Pins[k]; ok {
			e.Pins = append(e.Pins, PinSummary{Kind: k, Artifact: p.ArtifactName(), Tag: p.HumanTag(), Identity: p.Identity()})
		}
	}
	for _, gs := range st.Generations {
		if gs.ID == g.ID {
			e.State = gs.State
		}
	}
	if e.State == "" && st.Target == g.ID {
		e.State = "target"
	}
	for _, h := range st.History {
		if h.Target == g.ID {
			e.Promoted = h.At
		}
	}
	return e
}

// ReadGeneration reads the generation that idOrPrefix names (a whole id or
// a unique prefix of at least 6 hex digits after g-) from pool poolName
// (any pool when "") at the head of branch of repoURL. A prefix that names
// none or several is an error naming the repository, or listing the
// candidates (*idprefix.AmbiguousError).
func ReadGeneration(ctx context.Context, repoURL, branch, poolName, idOrPrefix string, opts ...gitops.Option) (*generation.Generation, error) {
	repo, t, _, err := snapshot(ctx, repoURL, branch, opts)
	if err != nil {
		return nil, err
	}
	p, id, err := pool.ResolveGeneration(t.List, poolName, idOrPrefix, repo.URL())
	if err != nil {
		return nil, err
	}
	return readGeneration(t, p, id)
}

// ResolveGeneration is ReadGeneration's lookup alone: the whole id of the
// generation idOrPrefix names.
func ResolveGeneration(ctx context.Context, repoURL, branch, poolName, idOrPrefix string, opts ...gitops.Option) (string, error) {
	repo, t, _, err := snapshot(ctx, repoURL, branch, opts)
	if err != nil {
		return "", err
	}
	_, id, err := pool.ResolveGeneration(t.List, poolName, idOrPrefix, repo.URL())
	if err != nil {
		return "", err
	}
	return id, nil
}

func snapshot(ctx context.Context, repoURL, branch string, opts []gitops.Option) (*gitops.Repo, *gitops.Tree, string, error) {
	if branch == "" {
		branch = "main"
	}
	repo, err := gitops.Open(ctx, repoURL, opts...)
	if err != nil {
		return nil, nil, "", err
	}
	t, rev, err := repo.Snapshot(ctx, branch)
	if err != nil {
		return nil, nil, "", err
	}
	return repo, t, rev, nil
}

func readGeneration(t *gitops.Tree, poolName, id string) (*generation.Generation, error) {
	file := pool.GenerationFile(poolName, id)
	b, err := t.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("release: %s: %w", file, err)
	}
	return generation.ParseNamed(b, file)
}

// PoolNames lists the pools of the config repository repoURL at the head
// of branch.
func PoolNames(ctx context.Context, repoURL, branch string, opts ...gitops.Option) ([]string, error) {
	_, t, _, err := snapshot(ctx, repoURL, branch, opts)
	if err != nil {
		return nil, err
	}
	return pool.Names(t.List)
}
