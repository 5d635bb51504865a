package pin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// The apiVersion and kind of a PinConfig document.
const (
	ConfigAPIVersion = "slipway.dev/v1alpha1"
	ConfigKind       = "PinConfig"
)

// Config names where custom resources keep images, and which sites to leave
// alone. A PinConfig document holds one (see LoadConfig):
//
//	apiVersion: slipway.dev/v1alpha1
//	kind: PinConfig
//	fields:
//	- kind: Workflow
//	  path: spec.steps[].image
//	podSpecs:
//	- apiVersion: example.com/v1
//	  kind: Runner
//	  path: spec.podTemplate.spec
//	exclude:
//	- kind: ConfigMap                 # every site of every ConfigMap
//	- kind: Task
//	  path: spec.steps[].image        # one field of a kind
//	- foundBy: image-like             # every image-like field
type Config struct {
	// Fields are paths to image strings.
	Fields []FieldSpec
	// PodSpecs are paths to pod specs; every container list in them is searched.
	PodSpecs []FieldSpec
	// Exclude selects sites that are neither pinned nor linted, only
	// counted (Site.ExcludedBy).
	Exclude []Exclude
}

// Exclude selects sites: every field that is set must match. At least one
// must be set.
type Exclude struct {
	// APIVersion must match the object's apiVersion exactly.
	APIVersion string
	// Kind must match the object's kind exactly.
	Kind string
	// Path, in the syntax of FieldSpec.Path, must match the site's path
	// within its object or a prefix of it: "spec.steps[]" selects every
	// image of every step, "metadata.annotations" every image-like
	// annotation.
	Path string
	// FoundBy must be the rule that found the site (known-kind,
	// pod-spec-shape, image-like or config).
	FoundBy FoundBy
	// Where is where the entry is written (file:line:col); LoadConfig sets it.
	Where string
}

// foundByRules are the values of Exclude.FoundBy.
var foundByRules = []FoundBy{ByKind, ByShape, ByImageKey, ByConfig}

// FieldSpec selects a path in the documents of one kind.
type FieldSpec struct {
	// APIVersion, when set, must match the document's apiVersion exactly.
	APIVersion string
	// Kind must match the document's kind exactly.
	Kind string
	// Path is dot-separated keys; "[]" after a key means every item of that
	// sequence, as in "spec.steps[].image", "[N]" its item N (from 0), and
	// the key "*" every value of a mapping, as in
	// "spec.replicaSpecs.*.template.spec".
	Path string
}

// segment is one key of a path; each means the items of its sequence value
// (every item, or only item at when one), any every key of a mapping.
type segment struct {
	key            string
	each, any, one bool
	at             int
}

// spec is a FieldSpec with its path parsed.
type spec struct {
	FieldSpec
	segs []segment
}

func (s spec) matches(apiVersion, kind string) bool {
	return s.Kind == kind && (s.APIVersion == "" || s.APIVersion == apiVersion)
}

func parsePath(p string) ([]segment, error) {
	if p == "" {
		return nil, errors.New("empty path")
	}
	var segs []segment
	for part := range strings.SplitSeq(p, ".") {
		s, ok := parseSegment(part)
		if !ok {
			return nil, fmt.Errorf("path %q: bad element %q (want key, key[], key[N], * or *[])", p, part)
		}
		segs = append(segs, s)
	}
	return segs, nil
}

func parseSegment(part string) (segment, bool) {
	key, index := part, ""
	if i := strings.IndexByte(part, '['); i >= 0 {
		var ok bool
		if index, ok = strings.CutSuffix(part[i+1:], "]"); !ok {
			return segment{}, false
		}
		key = part[:i]
	}
	s := segment{key: key, any: key == "*", each: index != "" || strings.HasSuffix(part, "[]")}
	if key == "" || strings.ContainsAny(key, "[]") || !s.any && strings.Contains(key, "*") {
		return segment{}, false
	}
	if index != "" {
		n, err := strconv.Atoi(index)
		if err != nil || n < 0 || strconv.Itoa(n) != index {
			return segment{}, false
		}
		s.one, s.at = true, n
	}
	return s, true
}

func compile(list []FieldSpec) ([]spec, error) {
	out := make([]spec, 0, len(list))
	for i, fs := range list {
		if fs.Kind == "" {
			return nil, fmt.Errorf("entry %d: no kind", i)
		}
		segs, err := parsePath(fs.Path)
		if err != nil {
			return nil, fmt.Errorf("entry %d (kind %s): %w", i, fs.Kind, err)
		}
		out = append(out, spec{FieldSpec: fs, segs: segs})
	}
	return out, nil
}

// exclusion is an Exclude with its path parsed.
type exclusion struct {
	Exclude
	segs []segment
}

func compileExclude(list []Exclude) ([]exclusion, error) {
	out := make([]exclusion, 0, len(list))
	for i, e := range list {
		if e.APIVersion == "" && e.Kind == "" && e.Path == "" && e.FoundBy == "" {
			return nil, fmt.Errorf("entry %d: none of apiVersion, kind, path and foundBy is set", i)
		}
		if e.FoundBy != "" && !slices.Contains(foundByRules, e.FoundBy) {
			return nil, fmt.Errorf("entry %d: foundBy %q, want one of %s", i, e.FoundBy, joinRules())
		}
		x := exclusion{Exclude: e}
		if e.Path != "" {
			segs, err := parsePath(e.Path)
			if err != nil {
				return nil, fmt.Errorf("entry %d: %w", i, err)
			}
			x.segs = segs
		}
		if x.Where == "" {
			x.Where = fmt.Sprintf("exclude[%d]", i)
		}
		out = append(out, x)
	}
	return out, nil
}

func joinRules() string {
	s := make([]string, len(foundByRules))
	for i, r := range foundByRules {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// matches says whether x selects a site found by by at path within an
// object of apiVersion and kind.
func (x exclusion) matches(apiVersion, kind string, by FoundBy, path []elem) bool {
	return (x.APIVersion == "" || x.APIVersion == apiVersion) && (x.Kind == "" || x.Kind == kind) &&
		(x.FoundBy == "" || x.FoundBy == by) && (x.segs == nil || pathHasPrefix(path, x.segs))
}

// pathHasPrefix says whether segs match path or a prefix of it.
func pathHasPrefix(path []elem, segs []segment) bool {
	i := 0
	for _, s := range segs {
		if i >= len(path) || path[i].index >= 0 || !s.any && path[i].key != s.key {
			return false
		}
		i++
		if s.each {
			if i >= len(path) || path[i].index < 0 || s.one && path[i].index != s.at {
				return false
			}
			i++
		}
	}
	return true
}

// Validate checks that every entry has a kind and a well-formed path, and
// every exclusion a well-formed path and a known rule.
func (c Config) Validate() error {
	if _, err := compile(c.Fields); err != nil {
		return fmt.Errorf("%w: fields: %w", ErrConfig, err)
	}
	if _, err := compile(c.PodSpecs); err != nil {
		return fmt.Errorf("%w: podSpecs: %w", ErrConfig, err)
	}
	if _, err := compileExclude(c.Exclude); err != nil {
		return fmt.Errorf("%w: exclude: %w", ErrConfig, err)
	}
	return nil
}

// LoadConfig reads a PinConfig document. Decoding is strict: unknown or
// repeated fields, aliases, a wrong apiVersion or kind, and more than one
// document are refused, with errors naming file:line.
func LoadConfig(path string) (Config, error) {
	data, _, err := readFile(path, path, DefaultMaxFileSize)
	if err != nil {
		return Config{}, err
	}
	return parseConfig(path, data)
}

func parseConfig(path string, data []byte) (Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := decode(dec, &doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Config{}, fmt.Errorf("%s: %w: empty file", path, ErrConfig)
		}
		return Config{}, syntaxError(path, data, err)
	}
	var extra yaml.Node
	if err := decode(dec, &extra); !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%s:%d: %w: more than one document", path, extra.Line, ErrConfig)
	}
	d := configDecoder{file: path}
	c := d.document(&doc)
	if d.err != nil {
		return Config{}, d.err
	}
	return c, nil
}

// configDecoder decodes a PinConfig node by node, keeping the first error.
type configDecoder struct {
	file string
	err  error
}

func (d *configDecoder) fail(n *yaml.Node, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%s:%d:%d: %w: %s", d.file, n.Line, n.Column, ErrConfig, fmt.Sprintf(format, args...))
	}
}

// fields calls set for each key of mapping n, refusing keys not in allowed,
// repeated keys and aliases.
func (d *configDecoder) fields(n *yaml.Node, what string, allowed []string, set func(key string, v *yaml.Node)) {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		d.fail(n, "%s: aliases and anchors are not allowed", what)
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, "%s is not a mapping", what)
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str":
			d.fail(k, "%s: key is not a string", what)
		case !slices.Contains(allowed, k.Value):
			d.fail(k, "%s: unknown field %q (known: %s)", what, k.Value, strings.Join(allowed, ", "))
		case seen[k.Value]:
			d.fail(k, "%s: field %q repeated", what, k.Value)
		case v.Kind == yaml.AliasNode || v.Anchor != "":
			d.fail(v, "%s: aliases and anchors are not allowed", what)
		default:
			seen[k.Value] = true
			set(k.Value, v)
		}
	}
}

func (d *configDecoder) str(n *yaml.Node, what string) string {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		d.fail(n, "%s is not a string", what)
		return ""
	}
	return n.Value
}

func (d *configDecoder) document(doc *yaml.Node) Config {
	var c Config
	if len(doc.Content) == 0 {
		d.fail(doc, "empty document")
		return c
	}
	root := doc.Content[0]
	var apiVersion, kind string
	d.fields(root, "PinConfig", []string{"apiVersion", "kind", "fields", "podSpecs", "exclude"}, func(key string, v *yaml.Node) {
		switch key {
		case "apiVersion":
			if apiVersion = d.str(v, key); apiVersion != ConfigAPIVersion {
				d.fail(v, "apiVersion %q, want %s", apiVersion, ConfigAPIVersion)
			}
		case "kind":
			if kind = d.str(v, key); kind != ConfigKind {
				d.fail(v, "kind %q, want %s", kind, ConfigKind)
			}
		case "fields":
			c.Fields = d.specs(v, key)
		case "podSpecs":
			c.PodSpecs = d.specs(v, key)
		case "exclude":
			c.Exclude = d.excludes(v, key)
		}
	})
	if d.err == nil && (apiVersion == "" || kind == "") {
		d.fail(root, "apiVersion %s and kind %s are required", ConfigAPIVersion, ConfigKind)
	}
	return c
}

func (d *configDecoder) specs(n *yaml.Node, what string) []FieldSpec {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, "%s is not a list", what)
		return nil
	}
	var out []FieldSpec
	for i, item := range n.Content {
		var fs FieldSpec
		where := fmt.Sprintf("%s[%d]", what, i)
		d.fields(item, where, []string{"apiVersion", "kind", "path"}, func(key string, v *yaml.Node) {
			switch key {
			case "apiVersion":
				fs.APIVersion = d.str(v, where+".apiVersion")
			case "kind":
				fs.Kind = d.str(v, where+".kind")
			case "path":
				fs.Path = d.str(v, where+".path")
				if _, err := parsePath(fs.Path); err != nil && fs.Path != "" {
					d.fail(v, "%s: %v", where, err)
				}
			}
		})
		if d.err == nil && (fs.Kind == "" || fs.Path == "") {
			d.fail(item, "%s: kind and path are required", where)
		}
		out = append(out, fs)
	}
	return out
}

func (d *configDecoder) excludes(n *yaml.Node, what string) []Exclude {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, "%s is not a list", what)
		return nil
	}
	var out []Exclude
	for i, item := range n.Content {
		e := Exclude{Where: fmt.Sprintf("%s:%d:%d", d.file, item.Line, item.Column)}
		where := fmt.Sprintf("%s[%d]", what, i)
		d.fields(item, where, []string{"apiVersion", "kind", "path", "foundBy"}, func(key string, v *yaml.Node) {
			switch key {
			case "apiVersion":
				e.APIVersion = d.str(v, where+".apiVersion")
			case "kind":
				e.Kind = d.str(v, where+".kind")
			case "path":
				e.Path = d.str(v, where+".path")
				if _, err := parsePath(e.Path); err != nil && e.Path != "" {
					d.fail(v, "%s: %v", where, err)
				}
			case "foundBy":
				e.FoundBy = FoundBy(d.str(v, where+".foundBy"))
				if !slices.Contains(foundByRules, e.FoundBy) {
					d.fail(v, "%s: foundBy %q, want one of %s", where, e.FoundBy, joinRules())
				}
			}
		})
		if d.err == nil && e.APIVersion == "" && e.Kind == "" && e.Path == "" && e.FoundBy == "" {
			d.fail(item, "%s: one of apiVersion, kind, path and foundBy is required", where)
		}
		out = append(out, e)
	}
	return out
}
