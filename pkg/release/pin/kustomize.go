package pin

import (
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// kustomization records each entry of a kustomization's images list, and,
// for the document of a file kustomize reads (kustomization.yaml), what it
// includes.
func (w *walker) kustomization(k *yaml.Node) error {
	build := w.kustomizeFile && len(w.path) == 0
	if build {
		if err := w.includes(k); err != nil {
			return err
		}
	}
	lists, err := w.values(k, "images")
	if err != nil {
		return err
	}
	w.push("images")
	defer w.pop()
	for _, seq := range lists {
		if seq.Kind != yaml.SequenceNode {
			continue
		}
		for i, e := range seq.Content {
			if e, err = w.deref(e); err != nil {
				return err
			}
			if e.Kind != yaml.MappingNode || w.seen.has(e) {
				continue
			}
			w.seen.add(e)
			t := target{entryNodes: &entryNodes{entry: e}}
			for _, f := range []struct {
				key string
				dst **yaml.Node
			}{{"name", &t.name}, {"newName", &t.newName}, {"newTag", &t.newTag}, {"digest", &t.digest}} {
				vs, err := w.values(e, f.key)
				if err != nil {
					return err
				}
				for _, v := range vs {
					if v.Kind == yaml.ScalarNode {
						*f.dst = v
						break
					}
				}
			}
			if build {
				w.entries = append(w.entries, len(w.sites))
			}
			w.pushIndex(i)
			value := composeImage(scalar(t.newName, scalar(t.name, "")), scalar(t.newTag, ""), scalar(t.digest, ""))
			w.add(Site{
				Line:        e.Line,
				Col:         e.Column,
				Kind:        KustomizeImage,
				FoundBy:     ByKind,
				Value:       value,
				ExcludedBy:  w.excludedBy(ByKind),
				Placeholder: placeholder(value),
			}, t)
			w.pop()
		}
	}
	return nil
}

// includes records the paths a kustomization takes resources from: the
// files and directories of resources, bases and components, and the patch
// files (patchesStrategicMerge, patches[].path), whose images its images
// transformer rewrites too.
func (w *walker) includes(k *yaml.Node) error {
	for _, key := range []string{"resources", "bases", "components", "patchesStrategicMerge", "patches"} {
		lists, err := w.values(k, key)
		if err != nil {
			return err
		}
		for _, seq := range lists {
			if seq.Kind != yaml.SequenceNode {
				continue
			}
			for _, item := range seq.Content {
				if item, err = w.deref(item); err != nil {
					return err
				}
				if key == "patches" {
					if item.Kind != yaml.MappingNode {
						continue
					}
					p, err := w.str(item, "path")
					if err != nil {
						return err
					}
					if p != "" {
						w.included = append(w.included, p)
					}
					continue
				}
				if item.Kind == yaml.ScalarNode && item.ShortTag() == "!!str" && item.Value != "" {
					w.included = append(w.included, item.Value)
				}
			}
		}
	}
	return nil
}

// scalar is the value of a scalar node, or def when it is missing or null.
func scalar(n *yaml.Node, def string) string {
	if n == nil || n.ShortTag() == "!!null" || n.Value == "" {
		return def
	}
	return n.Value
}

// composeImage is name[:tag][@digest].
func composeImage(name, tag, digest string) string {
	s := name
	if tag != "" {
		s += ":" + tag
	}
	if digest != "" {
		s += "@" + digest
	}
	return s
}
