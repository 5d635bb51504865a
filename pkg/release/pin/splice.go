package pin

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// source is a file's bytes with its line index, for locating and editing
// scalars.
type source struct {
	name  string
	data  []byte
	lines *lineIndex
}

func newSource(name string, data []byte) *source {
	return &source{name: name, data: data, lines: newLineIndex(data)}
}

func (w *source) errorf(n *yaml.Node, family error, format string, args ...any) error {
	return fmt.Errorf("%s:%d:%d: %w: %s", w.name, n.Line, n.Column, family, fmt.Sprintf(format, args...))
}

// rewriteErrorf is an ErrRewrite; Plan names the site.
func rewriteErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRewrite, fmt.Sprintf(format, args...))
}

// span is where a scalar is written in the file: [start, end) holds the
// scalar as written, quotes included.
type span struct {
	start, end int
	quote      byte // 0 for plain, '\'' or '"'
}

// edit replaces data[start:end] with text; start == end inserts.
type edit struct {
	start, end int
	text       string
	// inPlace says that the edit writes a value over a single-line scalar,
	// found exactly where the parser put it and read at that one place only
	// (scalarAt.alone), in the scalar's own quoting style, and that the value
	// keeps the document's structure (keepsStructure): parsing the file
	// again would find the same nodes, that one's value changed. Plan then
	// does not parse the file again.
	inPlace bool
}

// unspliceable says why a scalar cannot be spliced; spliceable when it can.
type unspliceable uint8

const (
	spliceable unspliceable = iota
	noPosition
	blockScalar
	quotedEscapes
	plainMoved
)

var unspliceableReasons = [...]string{
	noPosition:    "no such position in the file",
	blockScalar:   "block scalar (| or >)",
	quotedEscapes: "quoted scalar with escapes or line breaks",
	plainMoved:    "plain scalar that spans lines or is not where the parser put it",
}

func (u unspliceable) err() error { return rewriteErrorf("%s", unspliceableReasons[u]) }

// locate finds the exact bytes of a single-line scalar and checks that they
// are the scalar's value as written: plain, 'single' or "double" quoted,
// with no escapes and no line folding. Anything else cannot be spliced.
func (w *source) locate(v *yaml.Node) (span, error) {
	sp, why := w.span(v)
	if why != spliceable {
		return span{}, why.err()
	}
	return sp, nil
}

func (w *source) span(v *yaml.Node) (span, unspliceable) {
	off, ok := w.lines.offset(v.Line, v.Column)
	if !ok {
		return span{}, noPosition
	}
	off = skipProperties(w.data, off)
	val := v.Value
	switch {
	case v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		return span{}, blockScalar
	case v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0:
		q := byte('"')
		if v.Style&yaml.SingleQuotedStyle != 0 {
			q = '\''
		}
		end := off + 1 + len(val)
		if strings.ContainsAny(val, "\\\"'") || end >= len(w.data) || w.data[off] != q ||
			string(w.data[off+1:end]) != val || w.data[end] != q {
			return span{}, quotedEscapes
		}
		return span{start: off, end: end + 1, quote: q}, spliceable
	default:
		end := off + len(val)
		if val == "" || end > len(w.data) || string(w.data[off:end]) != val {
			return span{}, plainMoved
		}
		return span{start: off, end: end}, spliceable
	}
}

// scalarAt is where an image's scalar is written, found with the site: Plan
// splices there without the parsed document. It holds no pointer, so a
// tree's sites keep no part of the parsed documents alive.
type scalarAt struct {
	span
	why unspliceable
	// alone says that the scalar is a string (!!str) without an anchor: no
	// alias repeats it, so its value is read at this one place only.
	alone bool
	// line and col are the node's, as the parser reports them (before an
	// anchor or a tag).
	line, col int32
}

func (w *source) scalarAt(v *yaml.Node) scalarAt {
	sp, why := w.span(v)
	return scalarAt{span: sp, why: why, alone: v.Anchor == "" && v.ShortTag() == "!!str", line: int32(v.Line), col: int32(v.Column)}
}

// replace is the edit that writes s over the scalar.
func (a scalarAt) replace(s string) (edit, error) {
	if a.why != spliceable {
		return edit{}, a.why.err()
	}
	text, err := a.quoted(s)
	if err != nil {
		return edit{}, rewriteErrorf("%v", err)
	}
	return edit{start: a.start, end: a.end, text: text}, nil
}

// skipProperties steps over a node's anchor (&a) and tag (!t), and the
// spaces, line breaks and comments after them, to the scalar itself.
func skipProperties(data []byte, off int) int {
	for off < len(data) && (data[off] == '&' || data[off] == '!') {
		for off < len(data) && data[off] != ' ' && data[off] != '\t' && breakLen(data, off) == 0 {
			off++
		}
		off = skipSpace(data, off)
	}
	return off
}

// quoted writes s in the quoting style of sp. s must be a reference, which
// needs no escapes and is a string as a plain scalar, in block or flow context.
func (sp span) quoted(s string) (string, error) {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-/:@+", r)) {
			return "", fmt.Errorf("%q has a character a scalar would need to escape", s)
		}
	}
	if sp.quote == 0 {
		return s, nil
	}
	return string(sp.quote) + s + string(sp.quote), nil
}

// replaceScalar is the edit that writes s over the scalar v.
func (w *source) replaceScalar(v *yaml.Node, s string) (edit, error) {
	sp, err := w.locate(v)
	if err != nil {
		return edit{}, err
	}
	text, err := sp.quoted(s)
	if err != nil {
		return edit{}, rewriteErrorf("%v", err)
	}
	return edit{start: sp.start, end: sp.end, text: text}, nil
}

// insertDigest is the edit that adds "digest: d" to a kustomization images
// entry: a new line after the entry's last line with the indentation of its
// keys for a block mapping, ", digest: d" after the last value for a flow one.
func (w *source) insertDigest(entry *yaml.Node, d string) (edit, error) {
	if len(entry.Content) < 2 {
		return edit{}, rewriteErrorf("empty images entry")
	}
	last := entry.Content[len(entry.Content)-1]
	if last.Kind != yaml.ScalarNode || last.ShortTag() == "!!null" {
		return edit{}, rewriteErrorf("images entry does not end with a plain value")
	}
	sp, err := w.locate(last)
	if err != nil {
		return edit{}, err
	}
	if _, err := sp.quoted(d); err != nil {
		return edit{}, rewriteErrorf("%v", err)
	}
	if entry.Style&yaml.FlowStyle != 0 {
		next := skipSpace(w.data, sp.end)
		if next >= len(w.data) || (w.data[next] != ',' && w.data[next] != '}') {
			return edit{}, rewriteErrorf("cannot find the end of the flow mapping")
		}
		return edit{start: sp.end, end: sp.end, text: ", digest: " + d}, nil
	}
	at := w.lines.lineEnd(sp.end)
	if rest := strings.TrimLeft(string(w.data[sp.end:at]), " \t"); rest != "" && rest[0] != '#' {
		return edit{}, rewriteErrorf("unexpected text after the last value of the images entry")
	}
	nl := "\n"
	if at < len(w.data) {
		nl = string(w.data[at : at+breakLen(w.data, at)])
	} else if strings.Contains(string(w.data), "\r\n") {
		nl = "\r\n"
	}
	return edit{start: at, end: at, text: nl + strings.Repeat(" ", entry.Column-1) + "digest: " + d}, nil
}

// skipSpace steps over spaces, tabs, line breaks and comments.
func skipSpace(data []byte, off int) int {
	for off < len(data) {
		switch {
		case data[off] == ' ' || data[off] == '\t':
			off++
		case breakLen(data, off) > 0:
			off += breakLen(data, off)
		case data[off] == '#':
			for off < len(data) && breakLen(data, off) == 0 {
				off++
			}
		default:
			return off
		}
	}
	return off
}

// apply makes the edits, which must not overlap, on a copy of data.
func apply(data []byte, edits []edit) ([]byte, error) {
	edits = slices.Clone(edits)
	slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	size, pos := len(data), 0
	for _, e := range edits {
		if e.start < pos {
			return nil, fmt.Errorf("%w: overlapping edits at byte %d", ErrRewrite, e.start)
		}
		size += len(e.text) - (e.end - e.start)
		pos = e.end
	}
	b := make([]byte, 0, size)
	pos = 0
	for _, e := range edits {
		b = append(b, data[pos:e.start]...)
		b = append(b, e.text...)
		pos = e.end
	}
	return append(b, data[pos:]...), nil
}
