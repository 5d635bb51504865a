package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
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
// does not have and any second document. Errors are *Error: a syntax error
// at the exact line, an unknown field with the nearest valid name and no Go
// type names.
func Decode(b []byte, v any) (*Doc, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return nil, convert(b, v, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{Line: extra.Line, Msg: "one document per file"}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, convert(b, v, err)
	}
	return &Doc{root: &root}, nil
}

// convert turns "yaml: line 3: …" (or the first of yaml.v3's "unmarshal
// errors") into an *Error with its line, in words a YAML author knows.
func convert(b []byte, v any, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		line, msg := cutLine(te.Errors[0])
		return &Error{Line: line, Msg: explain(msg, v)}
	}
	line, msg := SyntaxLine(b, err)
	return &Error{Line: line, Msg: msg}
}

// cutLine splits "line 3: msg" into 3 and msg (0 when there is no line).
func cutLine(msg string) (int, string) {
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, after, ok := strings.Cut(rest, ":"); ok {
			if line, err := strconv.Atoi(n); err == nil {
				return line, strings.TrimSpace(after)
			}
		}
	}
	return 0, msg
}

// maxRescan bounds how many lines past the parser's SyntaxLine reparses.
const maxRescan = 400

// SyntaxLine is the line and message of a YAML syntax error from kyaml's
// yaml.v3 decoding data (all its documents). yaml.v3 names the line where
// the construct around the fault began, and for parser errors counts from
// 0 ("did not find expected key" on line 5 says line 4); SyntaxLine reparses
// data up to each following line and returns the first whose prefix fails
// with the same message: the line at fault. The message keeps no "yaml:"
// prefix.
func SyntaxLine(data []byte, err error) (int, string) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line, msg := cutLine(msg)
	if line == 0 {
		return 0, msg
	}
	ends := lineEnds(data)
	for k := line; k <= len(ends) && k < line+maxRescan; k++ {
		if perr := parseAll(data[:ends[k-1]]); perr != nil {
			if _, m := cutLine(strings.TrimPrefix(perr.Error(), "yaml: ")); m == msg {
				return k, msg
			}
		}
	}
	return line, msg
}

// lineEnds is the offset just past each line of data.
func lineEnds(data []byte) []int {
	var ends []int
	for i, c := range data {
		if c == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		ends = append(ends, len(data))
	}
	return ends
}

// parseAll decodes every document of data into nodes.
func parseAll(data []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml parser failed: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
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
