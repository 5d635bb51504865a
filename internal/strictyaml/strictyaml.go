package strictyaml

import (
	"bytes"
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Error is a decoding error at a line (0 when the decoder gave none).
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("%d: %s", e.Line, e.Msg)
}

// Doc is a decoded document's node tree, kept for line look-ups.
type Doc struct {
	root *yaml.Node
}

// Decode decodes the single YAML document in b into v, refusing fields v
// does not have and any second document. Errors are *Error.
func Decode(b []byte, v any) (*Doc, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return nil, convert(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{Line: extra.Line, Msg: "one document per file"}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, convert(err)
	}
	return &Doc{root: &root}, nil
}

// convert turns "yaml: line 3: …" (or the first of yaml.v3's "unmarshal
// errors") into an *Error with its line.
func convert(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n  ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			var line int
			if _, err := fmt.Sscanf(rest[:i], "%d", &line); err == nil {
				return &Error{Line: line, Msg: strings.TrimSpace(rest[i+1:])}
			}
		}
	}
	return &Error{Msg: msg}
}

// Line finds the line of the node at a dotted path with [i] indexes
// ("spec.steps[1].run"); the nearest existing ancestor's line when the field
// is absent, and 0 for an empty document.
func (d *Doc) Line(path string) int {
	if d == nil || d.root == nil || len(d.root.Content) == 0 {
		return 0
	}
	n := d.root.Content[0]
	best := n.Line
	if path == "" {
		return best
	}
	for _, part := range strings.Split(path, ".") {
		key, idx := part, -1
		if i := strings.IndexByte(part, '['); i >= 0 {
			key = part[:i]
			if _, err := fmt.Sscanf(part[i:], "[%d]", &idx); err != nil {
				return best
			}
		}
		next := mapValue(n, key)
		if next == nil {
			return best
		}
		n, best = next, next.Line
		if idx >= 0 {
			if n.Kind != yaml.SequenceNode || idx >= len(n.Content) {
				return best
			}
			n, best = n.Content[idx], n.Content[idx].Line
		}
	}
	return best
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
