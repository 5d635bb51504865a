package resolve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/slipway-dev/slipway/internal/atomicfile"
	"github.com/slipway-dev/slipway/pkg/ref"
)

// Lock document identity.
const (
	LockAPIVersion = "slipway.dev/v1alpha1"
	LockKind       = "Lock"
)

// ErrLockInvalid is the family of errors for lock files that do not parse or validate.
var ErrLockInvalid = errors.New("invalid lock")

// maxLockSize bounds a lock file read by ReadLock.
const maxLockSize = 32 << 20

// Lock lists the pins of a tree and where each came from. Its encoding is
// sorted and stable: the same pins always give the same bytes. It is safe for
// concurrent use.
type Lock struct {
	mu      sync.Mutex
	path    string
	entries map[lockKey]LockEntry
	canon   map[lockKey]lockKey // (canonical reference, platform) -> entries key
}

// LockEntry is one reference as written, the pin it resolved to, and its origin.
type LockEntry struct {
	Ref      string     `yaml:"ref" json:"ref"`
	Resolved string     `yaml:"resolved" json:"resolved"`
	Origin   ref.Origin `yaml:"origin" json:"origin"`
}

type lockKey struct{ ref, platform string }

type lockDoc struct {
	APIVersion string      `yaml:"apiVersion"`
	Kind       string      `yaml:"kind"`
	Images     []LockEntry `yaml:"images"`
}

// NewLock returns an empty lock.
func NewLock() *Lock { return &Lock{entries: map[lockKey]LockEntry{}, canon: map[lockKey]lockKey{}} }

// Add records that r resolved to p. A later Add for the same reference and platform replaces the earlier one.
func (l *Lock) Add(r ref.Reference, p ref.Pin) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := LockEntry{Ref: r.String(), Resolved: p.String(), Origin: p.Origin}
	if e.Origin.Source == ref.SourceLock {
		e.Origin.Source = ref.SourceRegistry // a lock records where the digest first came from
	}
	l.put(r, e)
}

func (l *Lock) put(r ref.Reference, e LockEntry) {
	k := lockKey{r.String(), e.Origin.Platform}
	l.entries[k] = e
	l.canon[lockKey{r.Canonical(), e.Origin.Platform}] = k
}

// Lookup finds the pin recorded for r at platform ("" for the index), matching
// any spelling of the same reference.
func (l *Lock) Lookup(r ref.Reference, platform string) (ref.Pin, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.entries[lockKey{r.String(), platform}]; ok {
		return l.pin(r, e)
	}
	if k, ok := l.canon[lockKey{r.Canonical(), platform}]; ok {
		return l.pin(r, l.entries[k])
	}
	return ref.Pin{}, false
}

func (l *Lock) pin(r ref.Reference, e LockEntry) (ref.Pin, bool) {
	res, err := ref.Parse(e.Resolved)
	if err != nil || !res.IsPinned() {
		return ref.Pin{}, false
	}
	o := e.Origin
	o.Source = ref.SourceLock
	return ref.PinOf(r, res.Digest(), o), true
}

// Entries returns the entries sorted by reference, then platform.
func (l *Lock) Entries() []LockEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]LockEntry, 0, len(l.entries))
	for _, e := range l.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Ref != out[j].Ref {
			return out[i].Ref < out[j].Ref
		}
		return out[i].Origin.Platform < out[j].Origin.Platform
	})
	return out
}

// Marshal encodes the lock as YAML, sorted and stable.
func (l *Lock) Marshal() ([]byte, error) {
	doc := lockDoc{APIVersion: LockAPIVersion, Kind: LockKind, Images: l.Entries()}
	if doc.Images == nil {
		doc.Images = []LockEntry{}
	}
	return yaml.Marshal(doc)
}

// WriteLock writes the lock to path atomically (temporary file, then rename).
func WriteLock(path string, l *Lock) error {
	b, err := l.Marshal()
	if err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	return atomicfile.Write(path, b, 0o644)
}

// ReadLock reads and validates a lock file. Errors name the file and line.
func ReadLock(path string) (*Lock, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if fi.Size() > maxLockSize {
		return nil, fmt.Errorf("%w: %s is %d bytes, over the limit of %d", ErrLockInvalid, path, fi.Size(), maxLockSize)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	l, err := ParseLock(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	l.path = path
	return l, nil
}

// ParseLock decodes a lock document strictly: unknown fields, a wrong
// apiVersion or kind, unparsable or unpinned references and duplicates are
// refused, naming the line.
func ParseLock(b []byte) (*Lock, error) {
	var doc lockDoc
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrLockInvalid, err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrLockInvalid, err)
	}
	if doc.APIVersion != LockAPIVersion || doc.Kind != LockKind {
		return nil, fmt.Errorf("%w: want apiVersion %s and kind %s, got %q and %q", ErrLockInvalid, LockAPIVersion, LockKind, doc.APIVersion, doc.Kind)
	}
	lines := entryLines(&root)
	l := NewLock()
	for i, e := range doc.Images {
		line := 0
		if i < len(lines) {
			line = lines[i]
		}
		r, err := ref.Parse(e.Ref)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: ref: %v", ErrLockInvalid, line, err)
		}
		res, err := ref.Parse(e.Resolved)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: resolved: %v", ErrLockInvalid, line, err)
		}
		if !res.IsPinned() {
			return nil, fmt.Errorf("%w: line %d: resolved %q has no digest", ErrLockInvalid, line, e.Resolved)
		}
		if res.Name() != r.Name() {
			return nil, fmt.Errorf("%w: line %d: resolved %q is not the repository of %q", ErrLockInvalid, line, e.Resolved, e.Ref)
		}
		k := lockKey{r.String(), e.Origin.Platform}
		if _, dup := l.entries[k]; dup {
			return nil, fmt.Errorf("%w: line %d: %s (platform %q) is listed twice", ErrLockInvalid, line, e.Ref, e.Origin.Platform)
		}
		e.Ref = r.String()
		l.put(r, e)
	}
	return l, nil
}

// entryLines returns the line of each item of the document's images sequence.
func entryLines(root *yaml.Node) []int {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "images" {
			var out []int
			for _, it := range m.Content[i+1].Content {
				out = append(out, it.Line)
			}
			return out
		}
	}
	return nil
}

// Record returns a resolver that adds every successful look-up of r to l.
func Record(r Resolver, l *Lock) Resolver {
	return Func(func(ctx context.Context, rf ref.Reference) (ref.Pin, error) {
		p, err := r.Resolve(ctx, rf)
		if err == nil && p.Origin.Source != ref.SourceWritten {
			l.Add(rf, p)
		}
		return p, err
	})
}

// Hermetic returns a resolver that answers only from l and never touches the
// network: a reference the lock lacks is an error naming it. References that
// already carry a digest pass as written.
func Hermetic(l *Lock, platform string) Resolver {
	return Func(func(_ context.Context, r ref.Reference) (ref.Pin, error) {
		if r.IsPinned() {
			return ref.PinOf(r, r.Digest(), ref.Origin{Source: ref.SourceWritten, Registry: r.Registry()}), nil
		}
		if p, ok := l.Lookup(r, platform); ok {
			return p, nil
		}
		where := "the lock"
		if l.path != "" {
			where = l.path
		}
		msg := fmt.Errorf("%s has no entry for it", where)
		if platform != "" {
			msg = fmt.Errorf("%s has no entry for it at platform %s", where, platform)
		}
		return ref.Pin{}, &Error{Ref: r.String(), Kind: ErrNotInLock, Err: msg}
	})
}
