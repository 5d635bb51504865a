package cli

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/slipway-dev/slipway/pkg/release/pin"
)

// coverage says, for pin and lint, what was read, what was found by which
// rule, and what was left alone and why: never more than was checked.
type coverage struct {
	sum  pin.Summary
	tree *pin.Tree
}

func newCoverage(tree *pin.Tree) coverage { return coverage{sum: tree.Summary(), tree: tree} }

// found is "12 image references in 3 files (5 documents): 8 by known kind, …".
func (c coverage) found() string {
	s := c.sum
	where := plural(s.Files, "file", "files") + " (" + plural(s.Documents, "document", "documents") + ")"
	if s.References == 0 {
		return "no image references in " + where
	}
	var by []string
	for _, r := range []struct {
		rule pin.FoundBy
		what string
	}{{pin.ByKind, "by known kind"}, {pin.ByShape, "by pod-spec shape"}, {pin.ByImageKey, "in image-like fields"}, {pin.ByConfig, "by config"}} {
		if n := s.Found[r.rule]; n > 0 {
			by = append(by, fmt.Sprintf("%d %s", n, r.what))
		}
	}
	return fmt.Sprintf("%s in %s: %s", plural(s.References, "image reference", "image references"), where, strings.Join(by, ", "))
}

// state is "all 12 pinned by digest" only when every reference is.
func (c coverage) state() string {
	s := c.sum
	if s.References == 0 {
		return ""
	}
	if s.Unpinned == 0 && s.Placeholders == 0 {
		return fmt.Sprintf("all %d pinned by digest", s.Pinned)
	}
	parts := []string{fmt.Sprintf("%d pinned by digest", s.Pinned)}
	if s.Unpinned > 0 {
		parts = append(parts, fmt.Sprintf("%d not", s.Unpinned))
	}
	if s.Placeholders > 0 {
		parts = append(parts, c.placeholders())
	}
	return strings.Join(parts, ", ")
}

func (c coverage) placeholders() string {
	return plural(c.sum.Placeholders, "placeholder", "placeholders") + " (${X}, {{ }}, $(params.x)…: not references, so not checked; pin the values substituted for them)"
}

// uncounted names the sites found but not counted as references.
func (c coverage) uncounted() string {
	var parts []string
	if n := c.sum.Excluded; n > 0 {
		parts = append(parts, fmt.Sprintf("%d excluded by config", n))
	}
	if n := c.sum.KustomizePlaceholders; n > 0 {
		parts = append(parts, plural(n, "kustomize placeholder", "kustomize placeholders")+" (left to the images entries that rename them, which are counted)")
	}
	if len(parts) == 0 {
		return ""
	}
	return "not counted: " + strings.Join(parts, ", ")
}

// skipped names what the walk did not read, and why.
func (c coverage) skipped() string {
	byKind := map[pin.SkipKind][]string{}
	for _, s := range c.tree.Skipped {
		byKind[s.Kind] = append(byKind[s.Kind], s.Path)
	}
	var parts []string
	if p := byKind[pin.SkipHidden]; len(p) > 0 {
		parts = append(parts, plural(len(p), "hidden directory", "hidden directories")+" ("+names(p)+"; --include-hidden walks all but .git, .hg and .svn)")
	}
	if c.sum.NotYAML > 0 {
		exts := slices.SortedFunc(maps.Keys(c.tree.NotYAML), func(a, b string) int {
			return cmp.Or(cmp.Compare(c.tree.NotYAML[b], c.tree.NotYAML[a]), cmp.Compare(a, b))
		})
		var each []string
		for _, e := range exts {
			name := e
			if name == "" {
				name = "no extension"
			}
			each = append(each, fmt.Sprintf("%s %d", name, c.tree.NotYAML[e]))
		}
		if len(each) > 5 {
			each = append(each[:5], "…")
		}
		parts = append(parts, plural(c.sum.NotYAML, "file", "files")+" not YAML ("+strings.Join(each, ", ")+")")
	}
	if p := byKind[pin.SkipTemplate]; len(p) > 0 {
		parts = append(parts, plural(len(p), "template that does", "templates that do")+" not parse as YAML ("+names(p)+")")
	}
	if p := byKind[pin.SkipSymlink]; len(p) > 0 {
		parts = append(parts, plural(len(p), "symlink", "symlinks")+", never followed ("+names(p)+")")
	}
	if p := byKind[pin.SkipSpecial]; len(p) > 0 {
		parts = append(parts, plural(len(p), "special file", "special files")+" ("+names(p)+")")
	}
	if len(parts) == 0 {
		return ""
	}
	return "skipped: " + strings.Join(parts, "; ")
}

// printLint writes lint's summary: found, state, uncounted, skipped.
func (c coverage) printLint(w io.Writer) {
	printLines(w, c.found(), c.state(), c.uncounted(), c.skipped())
}

// printPin writes pin's summary after its own first line: what it did not
// pin is named, never counted as pinned.
func (c coverage) printPin(w io.Writer, first string) {
	var ph string
	if c.sum.Placeholders > 0 {
		ph = "left as written: " + c.placeholders()
	}
	printLines(w, first, c.found(), ph, c.uncounted(), c.skipped())
}

func printLines(w io.Writer, lines ...string) {
	for _, l := range lines {
		if l != "" {
			fmt.Fprintln(w, l)
		}
	}
}

// names lists up to five paths.
func names(paths []string) string {
	if len(paths) > 5 {
		return strings.Join(paths[:5], ", ") + fmt.Sprintf(" and %d more", len(paths)-5)
	}
	return strings.Join(paths, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
