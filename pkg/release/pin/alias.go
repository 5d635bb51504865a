package pin

import (
	"fmt"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// minExpansion is the expanded size (in nodes) a document may always reach;
// beyond it, aliases may multiply a document's size by at most maxAliasRatio.
const (
	minExpansion  = 1 << 20
	maxAliasRatio = 10
	saturated     = 1 << 62
)

// checkAliases refuses a document that aliases would blow up (a "billion
// laughs") or that holds an alias to a node containing it, without expanding
// anything: the expanded size of each anchored node is computed once. It
// returns the number of nodes of the document as written.
func (w *walker) checkAliases(doc *yaml.Node) (int, error) {
	nodes, cyclic := 0, false
	var size func(n *yaml.Node) int
	size = func(n *yaml.Node) int {
		nodes++
		if n.Kind == yaml.AliasNode {
			if n.Alias == nil {
				return 1
			}
			s, ok := w.expanded[n.Alias]
			switch {
			case !ok: // an anchor of an earlier document
				s = size(n.Alias)
			case s < 0:
				cyclic = true
				return saturated
			}
			return s
		}
		if n.Anchor != "" {
			if w.expanded == nil {
				w.expanded = map[*yaml.Node]int{}
			}
			w.expanded[n] = -1
		}
		total := 1
		for _, c := range n.Content {
			total = min(saturated, total+size(c))
		}
		if n.Anchor != "" {
			w.expanded[n] = total
		}
		return total
	}
	total := size(doc)
	if cyclic {
		return 0, fmt.Errorf("%s:%d: %w: excessive aliasing: an alias refers to a node that contains it", w.name, doc.Line, ErrInput)
	}
	if limit := max(minExpansion, maxAliasRatio*nodes); total > limit {
		return 0, fmt.Errorf("%s:%d: %w: excessive aliasing: %d nodes would expand to more than %d", w.name, doc.Line, ErrInput, nodes, limit)
	}
	return nodes, nil
}
