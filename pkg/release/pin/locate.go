package pin

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// target ties a Site to what an edit changes: for an image, where its
// scalar is written, located when the site is found, so that no parsed node
// is kept; for a kustomization images entry, its nodes.
type target struct {
	img scalarAt
	*entryNodes
}

// entryNodes are a kustomization images entry and its fields' value nodes.
type entryNodes struct {
	entry                         *yaml.Node
	name, newName, newTag, digest *yaml.Node
}

// walker finds the sites of one file's documents.
type walker struct {
	*source
	opts          *options
	kustomizeFile bool               // named kustomization.yaml, .yml or Kustomization
	anchors       bool               // the file holds a '&', so maybe an anchor
	budget        int                // alias hops left
	depth         int                // nesting of lists in lists and merges in merges
	expanded      map[*yaml.Node]int // see checkAliases; made at the first anchor
	seen          seenNodes
	sites         []pendingSite
	text          []byte // the strings of sites
	targets       []target
	included      []string                     // what a kustomization.yaml includes, as written
	entries       []int                        // the sites of its images entries
	path          []elem                       // from the document's root to the node at hand
	walked        map[*yaml.Node]bool          // anchored nodes the shape rules walked
	obj           object                       // the object at hand
	reach         [2][3]func(*yaml.Node) error // by known kind and by config, for each reach; see reachFn
}

// seenNodes is a set of nodes: a few in a slice, as most files have, and a
// map beyond.
type seenNodes struct {
	few  []*yaml.Node
	many map[*yaml.Node]bool
}

func (s *seenNodes) has(n *yaml.Node) bool {
	if s.many != nil {
		return s.many[n]
	}
	for _, m := range s.few {
		if m == n {
			return true
		}
	}
	return false
}

func (s *seenNodes) add(n *yaml.Node) {
	switch {
	case s.many != nil:
		s.many[n] = true
	case len(s.few) < 32:
		s.few = append(s.few, n)
	default:
		s.many = make(map[*yaml.Node]bool, 2*len(s.few))
		for _, m := range s.few {
			s.many[m] = true
		}
		s.many[n] = true
	}
}

// object is the innermost Kubernetes object around the node at hand: its
// apiVersion and kind, and where its path starts.
type object struct {
	apiVersion, kind string
	base             int
}

// excludedBy is where the exclusion that selects a site found by by at the
// current path is written, "" when none does.
func (w *walker) excludedBy(by FoundBy) string {
	for _, x := range w.opts.exclude {
		if x.matches(w.obj.apiVersion, w.obj.kind, by, w.path[w.obj.base:]) {
			return x.Where
		}
	}
	return ""
}

func newWalker(src *source, o *options) *walker {
	return &walker{
		source: src, opts: o,
		kustomizeFile: isKustomizationName(filepath.Base(src.name)),
		budget:        o.aliasBudget,
		anchors:       bytes.IndexByte(src.data, '&') >= 0,
		path:          make([]elem, 0, 16),
	}
}

// reachFn is what a rule found by by (0 known kind, 1 config) does where its
// path leads (podSpecAt, containerAt, imageAt), made the first time a file
// needs it.
func (w *walker) reachFn(i int, to reach) func(*yaml.Node) error {
	if f := w.reach[i][to]; f != nil {
		return f
	}
	by := [...]FoundBy{ByKind, ByConfig}[i]
	var f func(*yaml.Node) error
	switch to {
	case podSpecAt:
		f = func(n *yaml.Node) error { return w.podSpec(n, by) }
	case containerAt:
		f = func(n *yaml.Node) error { return w.container(n, by) }
	default:
		f = func(n *yaml.Node) error { return w.image(n, Custom, "", by) }
	}
	w.reach[i][to] = f
	return f
}

// document finds the sites of one document.
func (w *walker) document(doc *yaml.Node) error {
	// Without an anchor there is no alias (the parser refuses one to an
	// unknown anchor): nothing can expand and no budget is spent.
	if w.anchors {
		nodes, err := w.checkAliases(doc)
		if err != nil {
			return err
		}
		w.budget += nodes
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	return w.object(doc.Content[0], "")
}

// maxDepth bounds the nesting of lists and mappings, and of merge keys
// within merged mappings.
const maxDepth = 1000

func (w *walker) enter(n *yaml.Node) error {
	if w.depth++; w.depth > maxDepth {
		return w.errorf(n, ErrInput, "nesting deeper than %d levels", maxDepth)
	}
	return nil
}

func (w *walker) leave() { w.depth-- }

// deref follows aliases, spending the budget.
func (w *walker) deref(n *yaml.Node) (*yaml.Node, error) {
	for n != nil && n.Kind == yaml.AliasNode {
		if w.budget--; w.budget < 0 {
			return nil, w.errorf(n, ErrInput, "excessive aliasing")
		}
		n = n.Alias
	}
	if n == nil {
		return nil, fmt.Errorf("%s: %w: alias without target", w.name, ErrInput)
	}
	return n, nil
}

// values is every value of key in mapping m, honouring merge keys ("<<"):
// explicit keys first, else the first merged mapping that has the key.
func (w *walker) values(m *yaml.Node, key string) ([]*yaml.Node, error) {
	if err := w.enter(m); err != nil {
		return nil, err
	}
	defer w.leave()
	m, err := w.deref(m)
	if err != nil || m.Kind != yaml.MappingNode {
		return nil, err
	}
	var out, merged []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			continue
		}
		switch {
		case k.Value == "<<" && k.ShortTag() == "!!merge":
			if v, err = w.deref(v); err != nil {
				return nil, err
			}
			if v.Kind == yaml.SequenceNode {
				merged = append(merged, v.Content...)
			} else {
				merged = append(merged, v)
			}
		case k.Value == key && k.ShortTag() == "!!str":
			if v.Kind != yaml.AliasNode && out == nil {
				out = m.Content[i+1 : i+2 : i+2] // the common case, without allocating
				continue
			}
			if v, err = w.deref(v); err != nil {
				return nil, err
			}
			out = append(out, v)
		}
	}
	for _, mm := range merged {
		if len(out) > 0 {
			break
		}
		if out, err = w.values(mm, key); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// str is the first string value of key in m, "" if none.
func (w *walker) str(m *yaml.Node, key string) (string, error) {
	vs, err := w.values(m, key)
	if err != nil {
		return "", err
	}
	for _, v := range vs {
		if v.Kind == yaml.ScalarNode && v.ShortTag() != "!!null" {
			return v.Value, nil
		}
	}
	return "", nil
}

// elem is one step of the path from a document's root to a node: a key of
// a mapping, or an index of a sequence when index >= 0.
type elem struct {
	key   string
	index int
}

func (w *walker) push(key string) { w.path = append(w.path, elem{key: key, index: -1}) }
func (w *walker) pushIndex(i int) { w.path = append(w.path, elem{index: i}) }
func (w *walker) pop()            { w.path = w.path[:len(w.path)-1] }

// appendPath appends the path to b, rendered as "spec.containers[0].image".
func (w *walker) appendPath(b []byte) []byte {
	for i, e := range w.path {
		switch {
		case e.index >= 0:
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(e.index), 10)
			b = append(b, ']')
		case i > 0:
			b = append(b, '.')
			fallthrough
		default:
			b = append(b, e.key...)
		}
	}
	return b
}

// follow calls fn with every node segs lead to from n, the path leading
// there pushed.
func (w *walker) follow(n *yaml.Node, segs []segment, fn func(*yaml.Node) error) error {
	if len(segs) == 0 {
		return fn(n)
	}
	if segs[0].any {
		return w.eachValue(n, func(key string, v *yaml.Node) error { return w.followValue(key, v, segs, fn) })
	}
	vs, err := w.values(n, segs[0].key)
	if err != nil {
		return err
	}
	for _, v := range vs {
		if err := w.followValue(segs[0].key, v, segs, fn); err != nil {
			return err
		}
	}
	return nil
}

// followValue follows segs[1:] from v, the value of key that segs[0] selects.
func (w *walker) followValue(key string, v *yaml.Node, segs []segment, fn func(*yaml.Node) error) error {
	s := segs[0]
	w.push(key)
	defer w.pop()
	if !s.each {
		return w.follow(v, segs[1:], fn)
	}
	if v.Kind != yaml.SequenceNode {
		return nil
	}
	for i, item := range v.Content {
		if s.one && i != s.at {
			continue
		}
		item, err := w.deref(item)
		if err != nil {
			return err
		}
		w.pushIndex(i)
		err = w.follow(item, segs[1:], fn)
		w.pop()
		if err != nil {
			return err
		}
	}
	return nil
}

// eachValue calls fn with every key of mapping m and its value, honouring
// merge keys: explicit keys first, then the keys of merged mappings that are
// not already set.
func (w *walker) eachValue(m *yaml.Node, fn func(key string, v *yaml.Node) error) error {
	if err := w.enter(m); err != nil {
		return err
	}
	defer w.leave()
	m, err := w.deref(m)
	if err != nil || m.Kind != yaml.MappingNode {
		return err
	}
	done := map[string]bool{}
	var merged []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		switch {
		case k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == "!!merge":
			if v, err = w.deref(v); err != nil {
				return err
			}
			if v.Kind == yaml.SequenceNode {
				merged = append(merged, v.Content...)
			} else {
				merged = append(merged, v)
			}
		case k.Kind == yaml.ScalarNode && k.ShortTag() == "!!str" && !done[k.Value]:
			done[k.Value] = true
			if v, err = w.deref(v); err != nil {
				return err
			}
			if err := fn(k.Value, v); err != nil {
				return err
			}
		}
	}
	for _, mm := range merged {
		err := w.eachValue(mm, func(key string, v *yaml.Node) error {
			if done[key] {
				return nil
			}
			done[key] = true
			return fn(key, v)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func isKustomization(apiVersion, kind string, byName bool) bool {
	group, _, _ := strings.Cut(apiVersion, "/")
	switch {
	case kind == "Kustomization":
		return apiVersion == "" || group == "kustomize.config.k8s.io"
	case kind == "Component":
		return group == "kustomize.config.k8s.io"
	}
	return kind == "" && apiVersion == "" && byName
}

// object finds the sites of one Kubernetes object; listKind is the kind an
// item of a typed list (DeploymentList) has when it does not say.
func (w *walker) object(n *yaml.Node, listKind string) error {
	if err := w.enter(n); err != nil {
		return err
	}
	defer w.leave()
	n, err := w.deref(n)
	if err != nil {
		return err
	}
	if n.Kind != yaml.MappingNode {
		return w.walkNode(n)
	}
	if n.Anchor != "" {
		if w.walked[n] {
			return nil
		}
		w.markWalked(n)
	}
	apiVersion, err := w.str(n, "apiVersion")
	if err != nil {
		return err
	}
	kind, err := w.str(n, "kind")
	if err != nil {
		return err
	}
	if kind == "" {
		kind = listKind
	}
	outer := w.obj
	w.obj = object{apiVersion: apiVersion, kind: kind, base: len(w.path)}
	defer func() { w.obj = outer }()
	for _, r := range knownKinds[kind] {
		if !r.applies(apiVersion) {
			continue
		}
		for _, p := range r.paths {
			if err := w.follow(n, p.segs, w.reachFn(0, p.to)); err != nil {
				return err
			}
		}
	}
	if isKustomization(apiVersion, kind, w.kustomizeFile && len(w.path) == 0) {
		if err := w.kustomization(n); err != nil {
			return err
		}
	}
	skip := ""
	if itemKind, ok := strings.CutSuffix(kind, "List"); ok {
		items, err := w.values(n, "items")
		if err != nil {
			return err
		}
		for _, seq := range items {
			if seq.Kind != yaml.SequenceNode {
				continue
			}
			skip = "items" // each item is an object: the shape rules run in each
			w.push("items")
			for i, item := range seq.Content {
				w.pushIndex(i)
				err := w.object(item, itemKind)
				w.pop()
				if err != nil {
					return err
				}
			}
			w.pop()
		}
	}
	for _, s := range w.opts.podSpecs {
		if s.matches(apiVersion, kind) {
			if err := w.follow(n, s.segs, w.reachFn(1, podSpecAt)); err != nil {
				return err
			}
		}
	}
	for _, s := range w.opts.fields {
		if s.matches(apiVersion, kind) {
			if err := w.follow(n, s.segs, w.reachFn(1, imageAt)); err != nil {
				return err
			}
		}
	}
	return w.walkMapping(n, skip)
}

// containerLists are the keys of a pod spec that hold containers.
var containerLists = [...]string{"containers", "initContainers", "ephemeralContainers"}

// podSpec finds the images of every container list of a pod spec.
func (w *walker) podSpec(spec *yaml.Node, by FoundBy) error {
	for _, list := range containerLists {
		vs, err := w.values(spec, list)
		if err != nil {
			return err
		}
		for _, seq := range vs {
			if err := w.containerList(list, seq, by); err != nil {
				return err
			}
		}
	}
	return nil
}

// containerList finds the image of every container of seq, the value of key.
func (w *walker) containerList(key string, seq *yaml.Node, by FoundBy) error {
	if seq.Kind != yaml.SequenceNode {
		return nil
	}
	w.push(key)
	defer w.pop()
	for i, c := range seq.Content {
		c, err := w.deref(c)
		if err != nil {
			return err
		}
		w.pushIndex(i)
		err = w.container(c, by)
		w.pop()
		if err != nil {
			return err
		}
	}
	return nil
}

// container finds the image of a container object.
func (w *walker) container(c *yaml.Node, by FoundBy) error {
	vs, err := w.values(c, "image")
	if err != nil || len(vs) == 0 {
		return err
	}
	policy, err := w.str(c, "imagePullPolicy")
	if err != nil {
		return err
	}
	w.push("image")
	defer w.pop()
	for _, v := range vs {
		if err := w.image(v, Container, policy, by); err != nil {
			return err
		}
	}
	return nil
}

// image records the scalar v, at the current path, as a site, once per node.
func (w *walker) image(v *yaml.Node, kind SiteKind, policy string, by FoundBy) error {
	v, err := w.deref(v)
	if err != nil || v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" || w.seen.has(v) {
		return err
	}
	w.seen.add(v)
	line, col := v.Line, v.Column
	at := w.scalarAt(v)
	if at.why == spliceable {
		line, col = w.lines.position(at.start)
	}
	w.add(Site{Line: line, Col: col, Kind: kind, FoundBy: by, Value: v.Value,
		PullPolicy: policy, Placeholder: placeholder(v.Value), ExcludedBy: w.excludedBy(by)}, target{img: at})
	return nil
}

// add records site s at the current path (s.File and s.Path are set when
// the file's sites are made: see pendingSite).
func (w *walker) add(s Site, t target) {
	p := pendingSite{line: s.Line, col: s.Col, kind: s.Kind}
	start := len(w.text)
	w.text = w.appendPath(w.text)
	p.text[0] = textRef{int32(start), int32(len(w.text) - start)}
	for i, str := range [...]string{string(s.FoundBy), s.Value, s.PullPolicy, s.Placeholder, s.ExcludedBy} {
		p.text[i+1] = textRef{int32(len(w.text)), int32(len(str))}
		w.text = append(w.text, str...)
	}
	w.sites = append(w.sites, p)
	w.targets = append(w.targets, t)
}

// pendingSite is a site as the walk finds it: its strings are kept in the
// file's text, one buffer without pointers, until Find is done reading every
// file and makes the sites (File.makeSites). The garbage collector, which
// runs many times while a tree is parsed, then has nothing of them to scan.
type pendingSite struct {
	line, col int
	kind      SiteKind
	text      [6]textRef // Path, FoundBy, Value, PullPolicy, Placeholder, ExcludedBy
}

// textRef is a string in a file's text.
type textRef struct{ off, n int32 }
