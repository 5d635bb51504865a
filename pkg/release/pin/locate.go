package pin

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// target ties a Site to the nodes an edit changes.
type target struct {
	// image is the scalar of a container or custom site.
	image *yaml.Node
	// entry is a kustomization images entry and its fields' value nodes.
	entry                         *yaml.Node
	name, newName, newTag, digest *yaml.Node
}

// walker finds the sites of one file's documents.
type walker struct {
	*source
	opts          *options
	kustomizeFile bool               // named kustomization.yaml, .yml or Kustomization
	budget        int                // alias hops left
	depth         int                // nesting of lists in lists and merges in merges
	expanded      map[*yaml.Node]int // see checkAliases
	seen          map[*yaml.Node]bool
	sites         []Site
	targets       []target
	included      []string // what a kustomization.yaml includes, as written
	entries       []int    // the sites of its images entries
}

func newWalker(src *source, o *options) *walker {
	return &walker{
		source: src, opts: o,
		kustomizeFile: isKustomizationName(filepath.Base(src.name)),
		budget:        o.aliasBudget,
		seen:          map[*yaml.Node]bool{},
		expanded:      map[*yaml.Node]int{},
	}
}

// document finds the sites of one document.
func (w *walker) document(doc *yaml.Node) error {
	nodes, err := w.checkAliases(doc)
	if err != nil {
		return err
	}
	w.budget += nodes
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	return w.object(doc.Content[0], "", "")
}

// maxDepth bounds lists within lists and merge keys within merged mappings.
const maxDepth = 1000

func (w *walker) enter(n *yaml.Node) error {
	if w.depth++; w.depth > maxDepth {
		return w.errorf(n, ErrInput, "nesting deeper than %d lists or merges", maxDepth)
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
		switch {
		case k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge":
			if v, err = w.deref(v); err != nil {
				return nil, err
			}
			if v.Kind == yaml.SequenceNode {
				merged = append(merged, v.Content...)
			} else {
				merged = append(merged, v)
			}
		case k.Kind == yaml.ScalarNode && k.Value == key && k.ShortTag() == "!!str":
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

// follow calls fn with every node segs lead to from n, and its path.
func (w *walker) follow(n *yaml.Node, path string, segs []segment, fn func(*yaml.Node, string) error) error {
	if len(segs) == 0 {
		return fn(n, path)
	}
	s := segs[0]
	vs, err := w.values(n, s.key)
	if err != nil {
		return err
	}
	p := join(path, s.key)
	for _, v := range vs {
		if !s.each {
			if err := w.follow(v, p, segs[1:], fn); err != nil {
				return err
			}
			continue
		}
		if v.Kind != yaml.SequenceNode {
			continue
		}
		for i, item := range v.Content {
			if item, err = w.deref(item); err != nil {
				return err
			}
			if err := w.follow(item, p+"["+strconv.Itoa(i)+"]", segs[1:], fn); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// builtinPodSpec is where the pod spec sits in a built-in workload kind, nil
// for other kinds. An object without apiVersion matches by kind alone.
func builtinPodSpec(apiVersion, kind string) []segment {
	group, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group = "" // "v1": the core group
	}
	in := func(groups ...string) bool { return apiVersion == "" || slices.Contains(groups, group) }
	spec, template := segment{key: "spec"}, segment{key: "template"}
	switch {
	case kind == "Pod" && in(""):
		return []segment{spec}
	case kind == "ReplicationController" && in(""),
		(kind == "Deployment" || kind == "StatefulSet" || kind == "DaemonSet" || kind == "ReplicaSet") && in("apps", "extensions"),
		kind == "Job" && in("batch"):
		return []segment{spec, template, spec}
	case kind == "CronJob" && in("batch"):
		return []segment{spec, {key: "jobTemplate"}, spec, template, spec}
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
func (w *walker) object(n *yaml.Node, path, listKind string) error {
	if err := w.enter(n); err != nil {
		return err
	}
	defer w.leave()
	n, err := w.deref(n)
	if err != nil || n.Kind != yaml.MappingNode {
		return err
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
	if segs := builtinPodSpec(apiVersion, kind); segs != nil {
		if err := w.follow(n, path, segs, w.podSpec); err != nil {
			return err
		}
	}
	if isKustomization(apiVersion, kind, w.kustomizeFile && path == "") {
		if err := w.kustomization(n, path); err != nil {
			return err
		}
	}
	if itemKind, ok := strings.CutSuffix(kind, "List"); ok {
		items, err := w.values(n, "items")
		if err != nil {
			return err
		}
		for _, seq := range items {
			if seq.Kind != yaml.SequenceNode {
				continue
			}
			for i, item := range seq.Content {
				if err := w.object(item, join(path, "items")+"["+strconv.Itoa(i)+"]", itemKind); err != nil {
					return err
				}
			}
		}
	}
	for _, s := range w.opts.podSpecs {
		if s.matches(apiVersion, kind) {
			if err := w.follow(n, path, s.segs, w.podSpec); err != nil {
				return err
			}
		}
	}
	for _, s := range w.opts.fields {
		if s.matches(apiVersion, kind) {
			err := w.follow(n, path, s.segs, func(v *yaml.Node, p string) error {
				return w.image(v, p, Custom, "")
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// podSpec finds the images of every container list of a pod spec.
func (w *walker) podSpec(spec *yaml.Node, path string) error {
	for _, list := range [...]string{"containers", "initContainers", "ephemeralContainers"} {
		err := w.follow(spec, path, []segment{{key: list, each: true}}, func(c *yaml.Node, p string) error {
			policy, err := w.str(c, "imagePullPolicy")
			if err != nil {
				return err
			}
			vs, err := w.values(c, "image")
			if err != nil {
				return err
			}
			for _, v := range vs {
				if err := w.image(v, join(p, "image"), Container, policy); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// image records the scalar v as a site, once per node.
func (w *walker) image(v *yaml.Node, path string, kind SiteKind, policy string) error {
	v, err := w.deref(v)
	if err != nil || v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" || w.seen[v] {
		return err
	}
	w.seen[v] = true
	line, col := v.Line, v.Column
	if sp, err := w.locate(v); err == nil {
		line, col = w.lines.position(sp.start)
	}
	w.add(Site{File: w.name, Line: line, Col: col, Path: path, Kind: kind, Value: v.Value, PullPolicy: policy},
		target{image: v})
	return nil
}

func (w *walker) add(s Site, t target) {
	w.sites = append(w.sites, s)
	w.targets = append(w.targets, t)
}
