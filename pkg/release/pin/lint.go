package pin

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/slipway-dev/slipway/pkg/ref"
)

// Finding is a reference that can still change, or that does not parse.
type Finding struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Col    int    `json:"col"`
	Ref    string `json:"ref"`
	Reason string `json:"reason"`
	// FoundBy is the rule that found the reference.
	FoundBy FoundBy `json:"foundBy"`
	// Placeholder is set when Ref is a placeholder, not a reference.
	Placeholder bool `json:"placeholder,omitempty"`
}

// String is "file:line:col: ref: reason".
func (f Finding) String() string {
	return fmt.Sprintf("%s:%d:%d: %s: %s", f.File, f.Line, f.Col, f.Ref, f.Reason)
}

// Reasons a Finding gives.
const (
	ReasonNoTag        = "no tag or digest: means latest, which moves; pin by digest"
	ReasonLatest       = "tag latest without digest: it moves; pin by digest"
	ReasonTag          = "tag without digest: tags are mutable; pin by digest"
	ReasonPullAlways   = "tag without digest: imagePullPolicy Always is no fix, it only asks for the tag again, which may return different bytes; pin by digest"
	ReasonKustomize    = "kustomization image without digest: newTag is mutable; pin by digest"
	ReasonKustomizeTag = "kustomization image without digest or newTag: there is no tag to pin"
	ReasonMalformed    = "malformed reference"
	// ReasonPlaceholder: a value another tool substitutes (Site.Placeholder).
	ReasonPlaceholder = "placeholder, not a reference: substituted before deploy, so not checked here; pin the value it is given"
	// ReasonImageLike prefixes the reason of a reference in an image-like
	// field (ByImageKey), a finding of its own kind.
	ReasonImageLike = "image-like field not pinned"
)

// Lint reports every site not pinned by digest, every reference that does
// not parse and every placeholder, sorted by file, line and column. A
// kustomize placeholder (Site.RenamedBy) is not reported: the images entry
// that renames it is. The reason of a site in an image-like field starts
// with ReasonImageLike.
func Lint(tree *Tree) []Finding {
	n := 0
	for _, f := range tree.Files {
		n += len(f.sites)
	}
	out := make([]Finding, 0, n)
	refs := newRefCache()
	for _, f := range tree.Files {
		for i, s := range f.sites {
			reason := lintSite(f, i, refs)
			if reason == "" {
				continue
			}
			if s.FoundBy == ByImageKey && s.Placeholder == "" {
				reason = ReasonImageLike + ": " + reason
			}
			out = append(out, Finding{File: s.File, Line: s.Line, Col: s.Col, Ref: s.Value, Reason: reason,
				FoundBy: s.FoundBy, Placeholder: s.Placeholder != ""})
		}
	}
	if len(out) == 0 {
		return nil
	}
	slices.SortStableFunc(out, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	return out
}

// refCache parses each distinct value once (a tree repeats its
// references), each repository once (ref.Parser).
type refCache struct {
	seen   map[string]parsedRef
	parser ref.Parser
}

func newRefCache() *refCache { return &refCache{seen: map[string]parsedRef{}} }

type parsedRef struct {
	ref ref.Reference
	err error
}

func (c *refCache) parse(s string) (ref.Reference, error) {
	p, ok := c.seen[s]
	if !ok {
		p.ref, p.err = c.parser.Parse(s)
		c.seen[s] = p
	}
	return p.ref, p.err
}

func lintSite(f *File, i int, refs *refCache) string {
	s := f.sites[i]
	switch {
	case s.ExcludedBy != "":
		return "" // left alone by the config
	case s.RenamedBy != "":
		return "" // a kustomize placeholder: its entry is linted
	case s.Placeholder != "":
		return ReasonPlaceholder
	}
	if s.Kind == KustomizeImage {
		t := f.targets[i]
		if scalar(t.newName, scalar(t.name, "")) == "" {
			return ReasonMalformed + ": images entry has neither name nor newName"
		}
		if _, err := refs.parse(s.Value); err != nil {
			return ReasonMalformed + ": " + err.Error()
		}
		switch {
		case scalar(t.digest, "") != "":
			return ""
		case scalar(t.newTag, "") == "":
			return ReasonKustomizeTag
		}
		return ReasonKustomize
	}
	r, err := refs.parse(s.Value)
	switch {
	case err != nil:
		return ReasonMalformed + ": " + err.Error()
	case r.IsPinned():
		return ""
	case r.Tag() == "":
		return ReasonNoTag
	case s.PullPolicy == "Always":
		return ReasonPullAlways
	case r.Tag() == ref.DefaultTag:
		return ReasonLatest
	}
	return ReasonTag
}
