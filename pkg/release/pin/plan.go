package pin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/resolve"
)

// Status says what Plan does to a file.
type Status string

// Statuses of a file in a Result.
const (
	Changed   Status = "changed"
	Unchanged Status = "unchanged"
)

// Change is one site Plan rewrites, from one reference to another.
type Change struct {
	Site
	From string `json:"from"`
	To   string `json:"to"`
}

// FileResult is what Plan does to one file: Data is its new contents (the
// old ones when Unchanged).
type FileResult struct {
	Path    string   `json:"path"`
	Status  Status   `json:"status"`
	Changes []Change `json:"changes,omitempty"`
	Data    []byte   `json:"-"`
	file    *File
}

// Result is a plan for a tree; Write carries it out.
type Result struct {
	Files []FileResult
	// Pins is every reference resolved, once each, sorted.
	Pins []ref.Pin

	createTemp func(dir, pattern string) (*os.File, error) // test hook; os.CreateTemp when nil
}

// Changes is every change of every file, in file order.
func (r *Result) Changes() []Change {
	var out []Change
	for _, f := range r.Files {
		out = append(out, f.Changes...)
	}
	return out
}

// DefaultConcurrency bounds the resolutions Plan runs at once.
const DefaultConcurrency = 32

// PlanOption configures Plan.
type PlanOption func(*planOptions) error

type planOptions struct {
	dropTag, refresh bool
	concurrency      int
	progress         func(Progress)
	checkAll         bool // parse every rewritten file again, in-place splices too (tests)
}

// Progress is how far Plan's resolution is: Resolved of Total distinct
// references looked up, Last the one that just finished ("" at the start).
type Progress struct {
	Resolved, Total int
	Last            string
}

// WithProgress calls fn as the references resolve: once before the first
// look-up and once after each (one at a time; fn must return quickly).
func WithProgress(fn func(Progress)) PlanOption {
	return func(o *planOptions) error { o.progress = fn; return nil }
}

// withCheckAll parses every rewritten file again, those whose edits are all
// in-place splices too: tests hold the two ways to the same result.
func withCheckAll() PlanOption {
	return func(o *planOptions) error { o.checkAll = true; return nil }
}

// WithDropTag writes repo@digest instead of repo:tag@digest. A kustomization
// entry keeps its newTag: the digest is added beside it.
func WithDropTag() PlanOption {
	return func(o *planOptions) error { o.dropTag = true; return nil }
}

// WithRefresh resolves references that already carry a digest again, by their
// tag, and updates the digest. Without it such a reference is left alone and
// not resolved at all. A reference with a digest and no tag stays as it is.
func WithRefresh() PlanOption {
	return func(o *planOptions) error { o.refresh = true; return nil }
}

// WithConcurrency bounds the resolutions run at once (default DefaultConcurrency).
func WithConcurrency(n int) PlanOption {
	return func(o *planOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: concurrency %d is below 1", ErrConfig, n)
		}
		o.concurrency = n
		return nil
	}
}

// want is what Plan needs for one site: the reference to resolve, or why not.
type want struct {
	file  *File
	index int
	query ref.Reference // tag to resolve; zero when nothing is
	key   string        // query.Canonical(), when ask
	ask   bool
	err   error
}

// Plan resolves every distinct unpinned reference of tree once, concurrently,
// and computes each file's new bytes. It writes nothing. If any reference
// cannot be pinned or resolved, or any value cannot be rewritten in place, it
// returns an error listing every such site (file:line:col, reference and
// cause, joined) and no Result. A kustomize placeholder (Site.RenamedBy) is
// never resolved nor rewritten: the images entry that renames it is; nor is
// a template's placeholder (Site.Placeholder), nor an excluded site
// (Site.ExcludedBy).
func Plan(ctx context.Context, tree *Tree, r resolve.Resolver, opts ...PlanOption) (*Result, error) {
	o := planOptions{concurrency: DefaultConcurrency}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	n := 0
	for _, f := range tree.Files {
		n += len(f.sites)
	}
	wants := make([]want, 0, n)
	queries := map[string]ref.Reference{}
	refs := newRefCache()
	for _, f := range tree.Files {
		for i := range f.sites {
			w := wanted(f, i, o.refresh, refs)
			if w.ask {
				w.key = w.query.Canonical()
				queries[w.key] = w.query
			}
			wants = append(wants, w)
		}
	}
	pins := resolveAll(ctx, r, queries, o.concurrency, o.progress)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("resolving: %w", err)
	}

	res := &Result{}
	var errs []siteError
	edits := map[*File][]edit{}
	changes := map[*File][]Change{}
	expect := map[*File][]string{} // each site's value after the rewrite
	check := map[*File]bool{}      // parse the rewritten file again: see edit.inPlace
	for _, w := range wants {
		site := w.file.sites[w.index]
		if w.err != nil {
			errs = append(errs, siteError{site, w.err})
			continue
		}
		if !w.ask {
			continue
		}
		p := pins[w.key]
		if p.err != nil {
			errs = append(errs, siteError{site, p.err})
			continue
		}
		c, e, err := change(w, p.pin.Digest, o.dropTag)
		if err != nil {
			errs = append(errs, siteError{site, err})
			continue
		}
		if c.From != c.To {
			if !e.inPlace || o.checkAll || site.FoundBy == ByImageKey && !parses(refs, c.To) {
				check[w.file] = true
			}
			edits[w.file] = append(edits[w.file], e)
			changes[w.file] = append(changes[w.file], c)
			if expect[w.file] == nil {
				expect[w.file] = siteValues(w.file.sites)
			}
			expect[w.file][w.index] = c.To
		}
	}
	// Rewrite the changed files concurrently. A file with an edit that is not
	// an in-place splice is parsed again and checked; one whose edits all are
	// keeps its structure by construction (see edit.inPlace).
	type rewritten struct {
		data []byte
		err  error
	}
	out := make([]rewritten, len(tree.Files))
	concurrently(len(tree.Files), func(i int) {
		f := tree.Files[i]
		switch {
		case len(edits[f]) == 0:
		case check[f]:
			out[i].data, out[i].err = rewrite(f, edits[f], expect[f], &tree.opts)
		default:
			if out[i].data, out[i].err = apply(f.src.data, edits[f]); out[i].err != nil {
				out[i].err = fmt.Errorf("%s: %w", f.Path, out[i].err)
			}
		}
	})
	for i, f := range tree.Files {
		slices.SortStableFunc(changes[f], func(a, b Change) int {
			return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
		})
		fr := FileResult{Path: f.Path, Status: Unchanged, Data: f.src.data, Changes: changes[f], file: f}
		if len(edits[f]) > 0 {
			if err := out[i].err; err != nil {
				errs = append(errs, siteError{Site{File: f.Path}, err})
				continue
			}
			fr.Status, fr.Data = Changed, out[i].data
		}
		res.Files = append(res.Files, fr)
	}
	if len(errs) > 0 {
		return nil, joinSiteErrors(errs)
	}
	type sorted struct {
		key string
		pin ref.Pin
	}
	all := make([]sorted, 0, len(pins))
	for _, p := range pins {
		if p.err == nil {
			all = append(all, sorted{p.pin.String(), p.pin})
		}
	}
	slices.SortFunc(all, func(a, b sorted) int { return cmp.Compare(a.key, b.key) })
	if len(all) > 0 {
		res.Pins = make([]ref.Pin, len(all))
		for i, p := range all {
			res.Pins[i] = p.pin
		}
	}
	return res, nil
}

// wanted decides what site i of f needs resolving.
func wanted(f *File, i int, refresh bool, refs *refCache) want {
	w := want{file: f, index: i}
	site := f.sites[i]
	if site.RenamedBy != "" || site.Placeholder != "" || site.ExcludedBy != "" {
		return w // a kustomize placeholder, whose entry is pinned, a template's, or excluded
	}
	if site.Kind == KustomizeImage {
		t := f.targets[i]
		name, tag, digest := scalar(t.newName, scalar(t.name, "")), scalar(t.newTag, ""), scalar(t.digest, "")
		switch {
		case name == "":
			w.err = fmt.Errorf("%w: images entry has neither name nor newName", ErrUnpinnable)
			return w
		case digest != "" && (!refresh || tag == ""):
			return w
		case tag == "":
			w.err = fmt.Errorf("%w: images entry has neither newTag nor digest: which tag?", ErrUnpinnable)
			return w
		}
		w.query, w.err = refs.parse(composeImage(name, tag, ""))
	} else {
		w.query, w.err = refs.parse(site.Value)
		if w.err == nil && w.query.IsPinned() {
			if !refresh || w.query.Tag() == "" {
				return w
			}
			w.query = w.query.WithDigest("")
		}
	}
	if w.err != nil {
		w.err = fmt.Errorf("%w: %w", ErrUnpinnable, w.err)
		return w
	}
	w.ask = true
	return w
}

type outcome struct {
	pin ref.Pin
	err error
}

// resolveAll resolves each query once, at most n at a time: n workers take
// the queries in turn (a goroutine per query costs more than a quick
// resolver's answer).
func resolveAll(ctx context.Context, r resolve.Resolver, queries map[string]ref.Reference, n int, progress func(Progress)) map[string]outcome {
	if progress != nil {
		progress(Progress{Total: len(queries)})
	}
	var (
		mu   sync.Mutex
		done int
	)
	keys := make([]string, 0, len(queries))
	for key := range queries {
		keys = append(keys, key)
	}
	results := make([]outcome, len(keys))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, len(keys)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(keys); i = int(next.Add(1) - 1) {
				var oc outcome
				if oc.err = ctx.Err(); oc.err == nil {
					oc.pin, oc.err = r.Resolve(ctx, queries[keys[i]])
				}
				if oc.err == nil && !isDigest(oc.pin.Digest) {
					oc.err = fmt.Errorf("%w: resolver answered %q, not sha256:<64 hex>", ErrUnpinnable, oc.pin.Digest)
				}
				results[i] = oc
				if progress != nil {
					mu.Lock()
					done++
					progress(Progress{Resolved: done, Total: len(queries), Last: queries[keys[i]].String()})
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	out := make(map[string]outcome, len(keys))
	for i, key := range keys {
		out[key] = results[i]
	}
	return out
}

func isDigest(d string) bool {
	hex, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for _, c := range hex {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// change computes the change and the edit that pins site w to digest d.
func change(w want, d string, dropTag bool) (Change, edit, error) {
	f, site := w.file, w.file.sites[w.index]
	t, wk := f.targets[w.index], f.src
	c := Change{Site: site, From: site.Value}
	if site.Kind == KustomizeImage {
		name, tag := scalar(t.newName, scalar(t.name, "")), scalar(t.newTag, "")
		c.To = composeImage(name, tag, d)
		if scalar(t.digest, "") == d {
			c.To = c.From
			return c, edit{}, nil
		}
		var e edit
		var err error
		if t.digest != nil {
			e, err = wk.replaceScalar(t.digest, d)
		} else {
			e, err = wk.insertDigest(t.entry, d)
		}
		return c, e, err
	}
	q := w.query
	tag := q.TagOrDefault()
	if dropTag {
		tag = ""
	}
	c.To = composeImage(q.Written(), tag, d)
	if c.To == c.From {
		return c, edit{}, nil
	}
	e, err := t.img.replace(c.To)
	e.inPlace = err == nil && t.img.alone && site.FoundBy != ByConfig && keepsStructure(c.To)
	return c, e, err
}

// keepsStructure says whether s, spliced over a scalar located exactly
// (scalarAt) in its quoting style, leaves every other node of the document
// as it was: s starts and ends with a letter or digit, so it opens no
// indicator and ends no key; it holds only the characters of a reference
// (span.quoted refuses others), so no blank, comment, flow indicator, quote
// or escape, and each colon in it is followed by one of those characters,
// not a blank, so it maps nothing; it is shorter than a simple key may be;
// and it holds "@" (a digest), so YAML resolves it to a string, never to a
// number, boolean, null or time. A site found by config is left out: a
// config may name any path, kind and apiVersion included, which other rules
// read.
func keepsStructure(s string) bool {
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	return len(s) > 1 && len(s) < 1024 && alnum(s[0]) && alnum(s[len(s)-1]) && strings.IndexByte(s, '@') > 0
}

// parses says whether s parses as a reference: an image-like field is a site
// only if its value does.
func parses(refs *refCache, s string) bool {
	_, err := refs.parse(s)
	return err == nil
}

func siteValues(sites []Site) []string {
	out := make([]string, len(sites))
	for i, s := range sites {
		out[i] = s.Value
	}
	return out
}

// rewrite applies the edits to f and checks the result: it must parse, and
// find the same sites with the expected values.
func rewrite(f *File, edits []edit, expect []string, o *options) ([]byte, error) {
	data, err := apply(f.src.data, edits)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	nf, err := parse(f.Path, data, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: the rewritten file does not parse: %w", f.Path, ErrRewrite, err)
	}
	if len(nf.sites) != len(f.sites) {
		return nil, fmt.Errorf("%s: %w: the rewritten file has %d image sites, not %d", f.Path, ErrRewrite, len(nf.sites), len(f.sites))
	}
	for i, s := range nf.sites {
		if old := f.sites[i]; s.Value != expect[i] || s.Path != old.Path || s.Kind != old.Kind {
			return nil, fmt.Errorf("%s: %w: the rewritten file reads %s %q, want %s %q",
				old.Pos(), ErrRewrite, s.Path, s.Value, old.Path, expect[i])
		}
	}
	return data, nil
}

// siteError is a failure at a site.
type siteError struct {
	site Site
	err  error
}

// joinSiteErrors sorts the failures by file, line and column and joins them,
// each as "file:line:col: ref: cause".
func joinSiteErrors(errs []siteError) error {
	slices.SortStableFunc(errs, func(a, b siteError) int {
		return cmp.Or(cmp.Compare(a.site.File, b.site.File), cmp.Compare(a.site.Line, b.site.Line), cmp.Compare(a.site.Col, b.site.Col))
	})
	out := make([]error, len(errs))
	for i, e := range errs {
		if e.site.Line == 0 {
			out[i] = e.err // already names the file
			continue
		}
		out[i] = fmt.Errorf("%s: %s: %w", e.site.Pos(), e.site.Value, e.err)
	}
	return errors.Join(out...)
}
