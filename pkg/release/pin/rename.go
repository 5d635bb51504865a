package pin

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// markRenamed sets RenamedBy on every site of the tree that the images
// transformer of a kustomization in the tree rewrites: an image of a file the
// kustomization includes, directly or through resources, bases, components
// and patches, whose name is the name of one of its images entries. That
// image is a placeholder (image: runner, renamed to the registry's runner by
// newName and newTag); resolving it as written would ask for an unrelated
// public image (docker.io/library/runner:latest). The entry that renames it
// is pinned instead.
//
// An images entry of an included kustomization whose result (newName or name,
// with newTag and digest) an including kustomization renames again is a
// placeholder too.
//
// Only the kustomizations in the tree count: a base pinned on its own, without
// the overlay that renames its image, has no placeholders.
func (t *Tree) markRenamed() {
	byPath := map[string]*File{}
	for _, f := range t.Files {
		if f.real != "" {
			byPath[f.real] = f
		}
	}
	for _, k := range t.Files {
		if len(k.entries) == 0 {
			continue
		}
		for _, f := range includedBy(k, byPath) {
			for i := range f.sites {
				if f.sites[i].RenamedBy != "" {
					continue
				}
				if e, ok := renamer(k, f, i); ok {
					pos := k.sites[e].Pos()
					f.sites[i].RenamedBy = pos
					f.Sites[i].RenamedBy = pos
				}
			}
		}
	}
}

// includedBy is every file of the tree that kustomization k includes,
// directly or through the kustomizations it includes, in the order found;
// k itself is not one of them, and a cycle ends where it closes.
func includedBy(k *File, byPath map[string]*File) []*File {
	seen := map[*File]bool{k: true}
	var out []*File
	var visit func(from *File)
	visit = func(from *File) {
		dir := filepath.Dir(from.real)
		for _, inc := range from.included {
			f := lookupIncluded(byPath, filepath.Join(dir, inc))
			if f == nil || seen[f] {
				continue
			}
			seen[f] = true
			out = append(out, f)
			visit(f) // only a kustomization includes anything
		}
	}
	visit(k)
	return out
}

// lookupIncluded is the file at p, or the kustomization of the directory p;
// nil when the tree has neither (a remote resource, a file outside the tree).
func lookupIncluded(byPath map[string]*File, p string) *File {
	if f, ok := byPath[p]; ok {
		return f
	}
	for _, name := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		if f, ok := byPath[filepath.Join(p, name)]; ok {
			return f
		}
	}
	return nil
}

// renamer is the images entry of kustomization k that renames site i of f,
// an image or the images entry of a kustomization k includes.
func renamer(k, f *File, i int) (int, bool) {
	s := f.sites[i]
	if s.Kind == KustomizeImage && !slices.Contains(f.entries, i) {
		return 0, false // not an entry of a kustomization kustomize builds
	}
	for _, e := range k.entries {
		if kustomizeNameMatches(s.Value, scalar(k.targets[e].name, "")) {
			return e, true
		}
	}
	return 0, false
}

// tagDigest is what may follow the name in an image that kustomize's images
// transformer matches (its imagetag filter): an optional :tag, an optional
// @algorithm:digest.
var tagDigest = regexp.MustCompile(`^(:[a-zA-Z0-9_.{}-]*)?(@[a-zA-Z][a-zA-Z0-9]*:[a-zA-Z0-9_.{}-]*)?$`)

// kustomizeNameMatches says whether an images entry with this name rewrites
// image, as kustomize decides: the image's repository as written, without tag
// or digest, is the name. Nothing is normalised (docker.io/library/runner is
// not runner); unlike kustomize, which reads name as a regular expression,
// the name is taken as written.
func kustomizeNameMatches(image, name string) bool {
	rest, ok := strings.CutPrefix(image, name)
	return name != "" && ok && tagDigest.MatchString(rest)
}

// Placeholders is every site that a kustomization of the tree renames
// (Site.RenamedBy), in file order.
func (t *Tree) Placeholders() []Site {
	var out []Site
	for _, s := range t.Sites() {
		if s.RenamedBy != "" {
			out = append(out, s)
		}
	}
	return out
}
