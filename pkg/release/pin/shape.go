package pin

import (
	"regexp"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/slipway-dev/slipway/pkg/ref"
)

// The rules for what no kind names, found by one walk over every node.
const (
	// ByShape: a container of a containers, initContainers or
	// ephemeralContainers list of objects with an image, anywhere: a pod
	// spec shape.
	ByShape FoundBy = "pod-spec-shape"
	// ByImageKey: any other string field named image whose value parses as
	// an image reference, or is a placeholder: an image-like field.
	ByImageKey FoundBy = "image-like"
)

// walkNode runs the shape rules over n and everything below it, once per
// node: a node reached again through an alias is not walked twice.
func (w *walker) walkNode(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode {
		var err error
		if n, err = w.deref(n); err != nil {
			return err
		}
	}
	if n.Kind != yaml.MappingNode && n.Kind != yaml.SequenceNode {
		return nil
	}
	if n.Anchor != "" {
		if w.walked[n] {
			return nil
		}
		w.markWalked(n)
	}
	if n.Kind == yaml.MappingNode {
		return w.walkMapping(n, "")
	}
	if err := w.enter(n); err != nil {
		return err
	}
	defer w.leave()
	for i, item := range n.Content {
		w.pushIndex(i)
		err := w.walkNode(item)
		w.pop()
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) markWalked(n *yaml.Node) {
	if w.walked == nil {
		w.walked = map[*yaml.Node]bool{}
	}
	w.walked[n] = true
}

// walkMapping runs the shape rules over the values of mapping m but that of
// the key skip (the items of a List, which are objects of their own).
func (w *walker) walkMapping(m *yaml.Node, skip string) error {
	if err := w.enter(m); err != nil {
		return err
	}
	defer w.leave()
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		var key string
		if k.Kind == yaml.ScalarNode {
			key = k.Value
		}
		if skip != "" && key == skip {
			continue
		}
		if v.Kind == yaml.AliasNode {
			var err error
			if v, err = w.deref(v); err != nil {
				return err
			}
		}
		var err error
		switch {
		case key == "<<" && k.ShortTag() == "!!merge":
			err = w.walkNode(v) // merged keys sit where they are written
		case v.Kind == yaml.ScalarNode:
			if key == "image" && k.ShortTag() == "!!str" {
				err = w.imageLike(m, v)
			}
		default:
			if v.Kind == yaml.SequenceNode && isContainerList(key) {
				if err = w.containerList(key, v, ByShape); err != nil {
					return err
				}
			}
			w.push(key)
			err = w.walkNode(v)
			w.pop()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func isContainerList(key string) bool {
	return key == "containers" || key == "initContainers" || key == "ephemeralContainers"
}

// imageLike records v, the string value of the key image of mapping m, if
// it parses as an image reference or is a placeholder.
func (w *walker) imageLike(m, v *yaml.Node) error {
	if w.seen.has(v) || v.Value == "" || v.ShortTag() != "!!str" {
		return nil
	}
	if placeholder(v.Value) == "" {
		if _, err := ref.Parse(v.Value); err != nil {
			return nil // not an image reference: a file name, a description
		}
	}
	policy, err := w.str(m, "imagePullPolicy")
	if err != nil {
		return err
	}
	w.push("image")
	defer w.pop()
	return w.image(v, Custom, policy, ByImageKey)
}

// dunder is a __NAME__ placeholder, as sed-style substitution writes it.
var dunder = regexp.MustCompile(`__[A-Za-z0-9_]*[A-Za-z][A-Za-z0-9_]*__`)

// placeholder names the template syntax in an image value that another tool
// substitutes before the manifest is applied: ${X} and $X (envsubst, shells,
// CI variables), $(params.x) (Tekton), {{ }} and {% %} (Helm, Argo
// Workflows, Jinja), __X__ (sed), ko:// (ko); "" when it has none.
func placeholder(v string) string {
	switch {
	case strings.Contains(v, "${"):
		return "${…}"
	case strings.Contains(v, "$("):
		return "$(…)"
	case strings.Contains(v, "{{") || strings.Contains(v, "{%"):
		return "{{…}}"
	case strings.HasPrefix(v, "ko://"):
		return "ko://"
	case dollarName(v):
		return "$NAME"
	case strings.Contains(v, "__") && dunder.MatchString(v):
		return "__…__"
	}
	return ""
}

// dollarName says whether v holds $ followed by a letter or underscore.
func dollarName(v string) bool {
	for i := strings.IndexByte(v, '$'); i >= 0 && i+1 < len(v); {
		c := v[i+1]
		if c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' {
			return true
		}
		j := strings.IndexByte(v[i+1:], '$')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}
