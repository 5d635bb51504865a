package pin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/slipway-dev/slipway/internal/strictyaml"
)

// SiteKind says what kind of field holds an image.
type SiteKind int

const (
	// Container is the image of a container, init container or ephemeral
	// container in a pod spec.
	Container SiteKind = iota + 1
	// KustomizeImage is an entry of a kustomization's images list.
	KustomizeImage
	// Custom is an image string outside a container: a field of a known
	// kind (SparkApplication's spec.image), one a PinConfig names, or an
	// image-like field.
	Custom
)

// FoundBy says which rule found a site.
type FoundBy string

// The rules that find sites.
const (
	// ByKind: a field of a kind known by name (KnownKinds), or an entry of
	// a kustomization's images list.
	ByKind FoundBy = "known-kind"
	// ByConfig: a field or pod spec that a PinConfig names.
	ByConfig FoundBy = "config"
)

func (k SiteKind) String() string {
	switch k {
	case Container:
		return "container"
	case KustomizeImage:
		return "kustomize-image"
	case Custom:
		return "custom"
	}
	return "SiteKind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText renders the kind as its name.
func (k SiteKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Site is one image reference in a file.
type Site struct {
	File string `json:"file"`
	// Line and Col are 1-based, of the value as written (of the entry for a
	// kustomization image).
	Line int `json:"line"`
	Col  int `json:"col"`
	// Path is the YAML path within its document, e.g.
	// "spec.template.spec.containers[0].image" or "images[2]".
	Path string   `json:"path"`
	Kind SiteKind `json:"kind"`
	// FoundBy is the rule that found the site.
	FoundBy FoundBy `json:"foundBy"`
	// Value is the image as written; for a kustomization entry it is composed:
	// (newName or name)[:newTag][@digest].
	Value string `json:"value"`
	// PullPolicy is the container's imagePullPolicy, if any.
	PullPolicy string `json:"pullPolicy,omitempty"`
	// Placeholder names the template syntax of a value that another tool
	// substitutes before the manifest is applied ("${…}", "$(…)", "{{…}}",
	// "__…__", "$NAME", "ko://"): it is no reference, so Plan leaves it
	// alone and Lint reports it as a placeholder. See placeholder.
	Placeholder string `json:"placeholder,omitempty"`
	// ExcludedBy is where the exclusion of a PinConfig that selects the
	// site is written (Exclude.Where): Plan and Lint leave it alone.
	ExcludedBy string `json:"excludedBy,omitempty"`
	// RenamedBy is the position (file:line:col) of the kustomization images
	// entry that rewrites this image when kustomize builds the tree: the
	// value is a placeholder, which Plan leaves alone and Lint does not
	// report; the entry is pinned and linted instead. See Find.
	RenamedBy string `json:"renamedBy,omitempty"`
}

// Pos is "file:line:col".
func (s Site) Pos() string { return fmt.Sprintf("%s:%d:%d", s.File, s.Line, s.Col) }

// DefaultMaxFileSize is the largest file Find reads unless WithMaxFileSize says otherwise.
const DefaultMaxFileSize int64 = 8 << 20

// Option configures Find.
type Option func(*options) error

type options struct {
	maxFileSize int64
	hidden      bool
	fields      []spec
	podSpecs    []spec
	exclude     []exclusion
	aliasBudget int // alias hops allowed per file on top of its node count
}

// WithConfig adds the field paths, pod spec paths and exclusions of c. It
// may be given more than once.
func WithConfig(c Config) Option {
	return func(o *options) error {
		fields, err := compile(c.Fields)
		if err != nil {
			return fmt.Errorf("%w: fields: %w", ErrConfig, err)
		}
		pods, err := compile(c.PodSpecs)
		if err != nil {
			return fmt.Errorf("%w: podSpecs: %w", ErrConfig, err)
		}
		exclude, err := compileExclude(c.Exclude)
		if err != nil {
			return fmt.Errorf("%w: exclude: %w", ErrConfig, err)
		}
		o.fields = append(o.fields, fields...)
		o.podSpecs = append(o.podSpecs, pods...)
		o.exclude = append(o.exclude, exclude...)
		return nil
	}
}

// WithMaxFileSize refuses files larger than n bytes (default DefaultMaxFileSize).
func WithMaxFileSize(n int64) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("%w: max file size %d is not positive", ErrConfig, n)
		}
		o.maxFileSize = n
		return nil
	}
}

// WithIncludeHidden walks hidden directories (.github, .argocd) too; version
// control metadata (.git, .hg, .svn) is never walked.
func WithIncludeHidden() Option {
	return func(o *options) error { o.hidden = true; return nil }
}

// withAliasBudget sets the alias hops allowed per file beyond its node count.
func withAliasBudget(n int) Option {
	return func(o *options) error { o.aliasBudget = n; return nil }
}

const defaultAliasBudget = 10_000

// Tree is the files Find read, with their sites. It keeps each file's bytes
// for Plan.
type Tree struct {
	Files []*File
	// Skipped lists what walking a directory did not read, with the reason:
	// symlinks, which are never followed, special files, hidden
	// directories, and templates that do not parse as YAML.
	Skipped []Skipped
	// NotYAML counts the files a walk did not read for their names (not
	// .yaml, .yml or Kustomization), by extension ("" for none).
	NotYAML map[string]int
	opts    options
}

// File is one YAML file and the image sites in it, in document order.
type File struct {
	Path string
	// Documents is the number of documents in the file.
	Documents int
	// Sites is a copy for the caller; Plan and Lint use their own.
	Sites   []Site
	sites   []Site
	src     *source
	mode    fs.FileMode
	real    string   // where the file is written: a symlink given explicitly is resolved
	targets []target // parallel to Sites
	// pending and text are the sites until makeSites makes them.
	pending []pendingSite
	text    string
	// included and entries are set for a kustomization.yaml: the paths it
	// includes as written, and the indexes of its images entries in sites.
	included []string
	entries  []int
	// collections counts the documents that are a mapping or a list: a
	// file given by a name that does not say YAML with none is not YAML.
	collections int
}

// Skipped is a path that walking a directory left alone.
type Skipped struct {
	Path   string   `json:"path"`
	Reason string   `json:"reason"`
	Kind   SkipKind `json:"kind"`
}

// SkipKind says why a path was skipped.
type SkipKind string

// Why paths are skipped.
const (
	SkipSymlink  SkipKind = "symlink"  // never followed below a path given
	SkipSpecial  SkipKind = "special"  // a device, pipe or socket named like YAML
	SkipHidden   SkipKind = "hidden"   // a hidden directory (see WithIncludeHidden)
	SkipTemplate SkipKind = "template" // a file with template braces that does not parse as YAML
)

func (s Skipped) String() string { return s.Path + ": " + s.Reason }

// Sites is every site of every file, in file order.
func (t *Tree) Sites() []Site {
	var out []Site
	for _, f := range t.Files {
		out = append(out, f.sites...)
	}
	return out
}

// Find reads the YAML files at paths and returns their image sites. A
// directory is walked: only .yaml and .yml files and files named
// Kustomization are read (the others are counted in Tree.NotYAML), hidden
// directories are skipped unless WithIncludeHidden (.git always), symlinks
// are never followed, and a file with template braces ({{ }}, {% %}) that
// does not parse as YAML, a Helm template, is skipped; each is listed in
// Tree.Skipped. A directory in which nothing is read is an error
// (ErrNoYAML). A file given explicitly is read as given, whatever its name,
// through a symlink if it is one; when its name does not say YAML and none of
// its documents is a mapping or a list (a text file), it is ErrNoYAML too.
//
// Find marks the kustomize placeholders (Site.RenamedBy): an image that the
// images list of a kustomization among the files read renames, in a file that
// kustomization includes (resources, bases, components, patches, and
// recursively). Kustomize matches an entry's name against the image's name as
// written, without tag or digest; so does Find.
//
// A file that does not parse, is too large, is not UTF-8 or aliases too much
// is refused (errors.Is ErrInput); the errors of all files are joined.
func Find(ctx context.Context, paths []string, opts ...Option) (*Tree, error) {
	o := options{maxFileSize: DefaultMaxFileSize, aliasBudget: defaultAliasBudget}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: no paths given", ErrInput)
	}
	// Walk every path, then read and parse the files concurrently, then
	// assemble the tree in the order of the paths and of their walks.
	type root struct {
		wk  *walk
		err error
	}
	type job struct {
		c        candidate
		root     int
		dup      bool // read already, through another path
		f        *File
		template *Skipped
		err      error
	}
	roots := make([]root, len(paths))
	var jobs []*job
	seen := map[string]bool{}
	for i, p := range paths {
		wk, err := collect(ctx, p, o.hidden)
		roots[i] = root{wk, err}
		if err != nil {
			continue
		}
		for _, c := range wk.cands {
			jobs = append(jobs, &job{c: c, root: i, dup: seen[c.real]})
			seen[c.real] = true
		}
	}
	// One file at a time: on two cores, parsing two at once took about a
	// tenth more CPU time (the garbage collector's, mostly) than one after
	// the other, for the wall time it saved (BenchmarkMixedTreeVsBefore).
	for k := range jobs {
		j := jobs[k]
		if ctx.Err() != nil {
			break
		}
		if j.dup {
			continue
		}
		data, mode, err := readFile(j.c.path, j.c.real, o.maxFileSize)
		if err != nil {
			j.err = err
			continue
		}
		f, err := parsePending(j.c.path, data, &o)
		var se *syntaxErr
		switch {
		case err != nil && j.c.walked && errors.As(err, &se) && isTemplate(data):
			j.template = &Skipped{Path: j.c.path, Kind: SkipTemplate,
				Reason: fmt.Sprintf("template braces and line %d does not parse as YAML: %s", se.line, se.msg)}
		case err != nil:
			j.err = err
		case !j.c.walked && !isYAMLName(filepath.Base(j.c.path)) && f.collections == 0:
			j.err = notYAML(j.c.path, f)
		default:
			f.mode, f.real = mode, j.c.real
			j.f = f
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := &Tree{opts: o}
	var errs []error
	next := 0
	for i, p := range paths {
		wk := roots[i].wk
		if roots[i].err != nil {
			errs = append(errs, roots[i].err)
			continue
		}
		t.Skipped = append(t.Skipped, wk.skipped...)
		for ext, n := range wk.notYAML {
			if t.NotYAML == nil {
				t.NotYAML = map[string]int{}
			}
			t.NotYAML[ext] += n
		}
		read, templates, failed := 0, 0, false
		for ; next < len(jobs) && jobs[next].root == i; next++ {
			switch j := jobs[next]; {
			case j.dup:
				read++
			case j.template != nil:
				t.Skipped = append(t.Skipped, *j.template)
				templates++
			case j.err != nil:
				errs, failed = append(errs, j.err), true
			default:
				t.Files = append(t.Files, j.f)
				read++
			}
		}
		if read == 0 && !failed && (len(wk.cands) == 0 || wk.cands[0].walked) {
			errs = append(errs, noYAML(p, wk, templates))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for _, f := range t.Files {
		f.makeSites()
	}
	t.markRenamed()
	return t, nil
}

// StdinName is what a stream read by FindStream is called in sites and
// errors when the caller names it after standard input.
const StdinName = "<stdin>"

// FindStream reads one YAML stream from r, as Find reads one file, and
// returns a tree of one file called name (kbld's -f -). A stream with no
// mapping or list document in it is not YAML (ErrNoYAML). Its Result cannot
// be written back (there is no file): the caller prints the rewritten
// stream, FileResult.Data.
func FindStream(ctx context.Context, name string, r io.Reader, opts ...Option) (*Tree, error) {
	o := options{maxFileSize: DefaultMaxFileSize, aliasBudget: defaultAliasBudget}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	data, err := io.ReadAll(io.LimitReader(r, o.maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, ErrInput, err)
	}
	if int64(len(data)) > o.maxFileSize {
		return nil, fmt.Errorf("%s: %w: over the limit of %d bytes", name, ErrInput, o.maxFileSize)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := parse(name, data, &o)
	if err != nil {
		return nil, err
	}
	if f.collections == 0 {
		return nil, notYAML(name, f)
	}
	t := &Tree{Files: []*File{f}, opts: o}
	t.markRenamed()
	return t, nil
}

// notYAML is the error for a file named explicitly, or a stream, that
// parsed but holds no mapping or list: a text file read as one string.
func notYAML(name string, f *File) error {
	if f.Documents == 0 {
		return fmt.Errorf("%s: %w: it holds no YAML document", name, ErrNoYAML)
	}
	return fmt.Errorf("%s: %w: %s, none a mapping or a list (a text file?)", name, ErrNoYAML, plural(f.Documents, "document"))
}

// concurrently calls fn(0) … fn(n-1), as many at once as GOMAXPROCS allows.
func concurrently(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// readFile reads at most limit bytes of the file at real, naming it name in errors.
func readFile(name, real string, limit int64) ([]byte, fs.FileMode, error) {
	f, err := os.Open(real)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w: %w", name, ErrInput, unwrapPath(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w: %w", name, ErrInput, unwrapPath(err))
	}
	if fi.IsDir() {
		return nil, 0, fmt.Errorf("%s: %w: is a directory", name, ErrInput)
	}
	if fi.Mode().IsRegular() && fi.Size() > limit {
		return nil, 0, fmt.Errorf("%s: %w: %d bytes, over the limit of %d", name, ErrInput, fi.Size(), limit)
	}
	size := int64(0)
	if fi.Mode().IsRegular() {
		size = fi.Size()
	}
	data, err := readAll(io.LimitReader(f, limit+1), size)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w: %w", name, ErrInput, unwrapPath(err))
	}
	if int64(len(data)) > limit {
		return nil, 0, fmt.Errorf("%s: %w: over the limit of %d bytes", name, ErrInput, limit)
	}
	return data, fi.Mode().Perm(), nil
}

// readAll is io.ReadAll into a buffer sized for a file of size bytes at
// once: one allocation, where io.ReadAll grows from 512 bytes.
func readAll(r io.Reader, size int64) ([]byte, error) {
	b := make([]byte, 0, max(size+1, 512)) // +1: the read that meets EOF
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// unwrapPath drops the path an *fs.PathError repeats, since callers name the file.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// parsePending decodes every document of a file and finds its sites, to be
// made by makeSites.
func parsePending(name string, data []byte, o *options) (*File, error) {
	src := newSource(name, data)
	if !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			r, w := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && w == 1 {
				break
			}
			off += w
		}
		line, _ := src.lines.position(off)
		return nil, fmt.Errorf("%s:%d: %w: not valid UTF-8", name, line, ErrInput)
	}
	w := newWalker(src, o)
	// Most sites are a key image (or an images list): size for them at once.
	if n := min(bytes.Count(data, []byte("image")), 64); n > 0 {
		w.sites, w.targets, w.text = make([]pendingSite, 0, n), make([]target, 0, n), make([]byte, 0, 128*n)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	docs, collections := 0, 0
	for {
		var doc yaml.Node
		err := decode(dec, &doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, syntaxError(name, data, err)
		}
		docs++
		if len(doc.Content) > 0 && (doc.Content[0].Kind == yaml.MappingNode || doc.Content[0].Kind == yaml.SequenceNode) {
			collections++
		}
		if err := w.document(&doc); err != nil {
			return nil, err
		}
	}
	return &File{Path: name, Documents: docs, pending: slices.Clone(w.sites), text: string(w.text), src: src,
		targets: slices.Clone(w.targets), included: w.included, entries: w.entries, collections: collections}, nil
}

// parse decodes every document of a file and finds its sites, made.
func parse(name string, data []byte, o *options) (*File, error) {
	f, err := parsePending(name, data, o)
	if err != nil {
		return nil, err
	}
	f.makeSites()
	return f, nil
}

// makeSites makes the sites the walk found, two copies (Sites and sites),
// their strings parts of the file's text.
func (f *File) makeSites() {
	if f.pending == nil {
		return
	}
	sites := make([]Site, len(f.pending))
	for i, p := range f.pending {
		str := func(k int) string { return f.text[p.text[k].off : p.text[k].off+p.text[k].n] }
		sites[i] = Site{File: f.Path, Line: p.line, Col: p.col, Path: str(0), Kind: p.kind, FoundBy: FoundBy(str(1)),
			Value: str(2), PullPolicy: str(3), Placeholder: str(4), ExcludedBy: str(5)}
	}
	f.Sites, f.sites, f.pending, f.text = sites, slices.Clone(sites), nil, ""
}

// decode keeps a panic in the YAML parser from crossing into the caller.
func decode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml parser failed: %v", r)
		}
	}()
	return dec.Decode(n)
}

// syntaxErr is YAML that does not parse, at a line.
type syntaxErr struct {
	err  error
	line int
	msg  string
}

func (e *syntaxErr) Error() string { return e.err.Error() }
func (e *syntaxErr) Unwrap() error { return e.err }

// isTemplate says whether data holds template braces.
func isTemplate(data []byte) bool {
	return bytes.Contains(data, []byte("{{")) || bytes.Contains(data, []byte("{%"))
}

// noYAML is the error for a directory in which nothing was read.
func noYAML(root string, wk *walk, templates int) error {
	var what []string
	n := 0
	for _, c := range wk.notYAML {
		n += c
	}
	if n > 0 {
		what = append(what, plural(n, "file")+" not YAML")
	}
	hidden := 0
	for _, s := range wk.skipped {
		if s.Kind == SkipHidden {
			hidden++
		}
	}
	if hidden > 0 {
		what = append(what, plural(hidden, "hidden directory")+" not walked")
	}
	if templates > 0 {
		what = append(what, plural(templates, "template")+" not parsing as YAML")
	}
	if others := len(wk.skipped) - hidden; others > 0 {
		what = append(what, plural(others, "symlink or special file")+" skipped")
	}
	if len(what) == 0 {
		what = append(what, "it is empty")
	}
	return fmt.Errorf("%s: %w (.yaml, .yml, Kustomization): %s", root, ErrNoYAML, strings.Join(what, ", "))
}

// plural is "1 file", "2 files", "2 hidden directories".
func plural(n int, noun string) string {
	if n != 1 {
		if s, ok := strings.CutSuffix(noun, "y"); ok {
			noun = s + "ies"
		} else {
			noun += "s"
		}
	}
	return strconv.Itoa(n) + " " + noun
}

// syntaxError names file:line for a parser error ("yaml: line 3: …").
func syntaxError(name string, data []byte, err error) error {
	line, msg := strictyaml.SyntaxLine(data, err)
	if line == 0 {
		line = guessLine(data, msg)
	}
	return &syntaxErr{err: fmt.Errorf("%s:%d: %w: invalid yaml: %s", name, line, ErrInput, msg), line: line, msg: msg}
}

// guessLine finds the line of the parser errors that do not say it.
func guessLine(data []byte, msg string) int {
	off := -1
	if a, ok := strings.CutPrefix(msg, "unknown anchor '"); ok {
		if anchor, _, ok := strings.Cut(a, "'"); ok {
			off = bytes.Index(data, []byte("*"+anchor))
		}
	} else if strings.Contains(msg, "control characters") {
		off = bytes.IndexFunc(data, func(r rune) bool {
			return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f
		})
	}
	if off < 0 {
		return 1
	}
	line, _ := newLineIndex(data).position(off)
	return line
}

func isKustomizationName(base string) bool {
	switch base {
	case "kustomization.yaml", "kustomization.yml", "Kustomization":
		return true
	}
	return false
}
