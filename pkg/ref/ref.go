package ref

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// ErrInvalid is the family of errors for references that do not parse.
var ErrInvalid = errors.New("invalid image reference")

// DefaultTag is the tag a reference without tag or digest means.
const DefaultTag = "latest"

// MaxLength bounds the length of a reference accepted by Parse.
const MaxLength = 4096

// Reference is a parsed image reference. The zero value is not valid; use Parse.
type Reference struct {
	repo    name.Repository // normalised registry and repository
	written string          // the repository as the user wrote it, without tag or digest
	tag     string          // "" when none was written
	digest  string          // "sha256:<hex>", "" when none was written
}

// Parse parses s as an image reference: [registry[:port]/]repository[:tag][@digest].
// Docker Hub is the default registry and "library/" its default namespace.
// The returned error wraps ErrInvalid.
func Parse(s string) (Reference, error) { return parse(s, nil) }

// Parser parses references as Parse does, with the same results and errors,
// and keeps the repository of each reference without a digest it parsed, so
// that it parses each repository once: a tree's lint parses thousands of
// references of a few repositories. The zero value is ready to use; a Parser
// is not safe for concurrent use.
type Parser struct {
	repos map[string]parsedRepo // by the repository as written
}

type parsedRepo struct {
	repo name.Repository
	err  error
}

// Parse parses s as the function Parse does.
func (p *Parser) Parse(s string) (Reference, error) {
	if p.repos == nil {
		p.repos = map[string]parsedRepo{}
	}
	return parse(s, p.repos)
}

// parse is Parse; with repos, the repository of a reference without a digest
// comes from repos, or is parsed once and kept there. Without a digest, the
// repository is name.NewRepository(written) whether the reference has a tag
// or not: name.NewTag(base) checks the tag, which isTag has already checked
// more strictly, then returns name.NewRepository's result for the same
// written part, its error unchanged.
func parse(s string, repos map[string]parsedRepo) (Reference, error) {
	if s == "" {
		return Reference{}, fmt.Errorf("%w: empty reference", ErrInvalid)
	}
	if len(s) > MaxLength {
		return Reference{}, fmt.Errorf("%w: reference is %d bytes, over the limit of %d", ErrInvalid, len(s), MaxLength)
	}
	if strings.TrimSpace(s) != s || strings.ContainsAny(s, " \t\r\n") {
		return Reference{}, fmt.Errorf("%w: %q contains white space", ErrInvalid, s)
	}
	base, digest, hasDigest := strings.Cut(s, "@")
	if hasDigest {
		d, err := name.NewDigest(s, name.WeakValidation)
		if err != nil {
			return Reference{}, fmt.Errorf("%w: %q: %v", ErrInvalid, s, err)
		}
		digest = d.DigestStr()
	}
	written, tag := splitTag(base)
	if strings.HasSuffix(base, ":") {
		return Reference{}, fmt.Errorf("%w: %q: empty tag", ErrInvalid, s)
	}
	if tag != "" && !isTag(tag) {
		return Reference{}, fmt.Errorf("%w: %q: tag %q must match %s", ErrInvalid, s, tag, tagPattern)
	}
	var repo name.Repository
	if rp, ok := repos[written]; ok && !hasDigest {
		if rp.err != nil {
			return Reference{}, fmt.Errorf("%w: %q: %v", ErrInvalid, s, rp.err)
		}
		repo = rp.repo
	} else if repos != nil && !hasDigest {
		r, err := name.NewRepository(written, name.WeakValidation)
		repos[written] = parsedRepo{r, err}
		if err != nil {
			return Reference{}, fmt.Errorf("%w: %q: %v", ErrInvalid, s, err)
		}
		repo = r
	} else if tag != "" {
		t, err := name.NewTag(base, name.WeakValidation)
		if err != nil {
			return Reference{}, fmt.Errorf("%w: %q: %v", ErrInvalid, s, err)
		}
		repo = t.Context()
	} else {
		r, err := name.NewRepository(written, name.WeakValidation)
		if err != nil {
			return Reference{}, fmt.Errorf("%w: %q: %v", ErrInvalid, s, err)
		}
		repo = r
	}
	for c := range strings.SplitSeq(repo.RepositoryStr(), "/") {
		if !isComponent(c) {
			return Reference{}, fmt.Errorf("%w: %q: path component %q must match %s", ErrInvalid, s, c, componentPattern)
		}
	}
	return Reference{repo: repo, written: written, tag: tag, digest: digest}, nil
}

// The OCI distribution grammar for repository path components and tags, as
// the errors name it; isComponent and isTag match it without a regexp (a
// tree's lint parses every reference in it).
const (
	componentPattern = `^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`
	tagPattern       = `^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`
)

// isComponent says whether c matches componentPattern: runs of lower-case
// letters and digits joined by ".", "_", "__" or any number of "-".
func isComponent(c string) bool {
	i := 0
	for {
		j := i
		for j < len(c) && (c[j] >= 'a' && c[j] <= 'z' || c[j] >= '0' && c[j] <= '9') {
			j++
		}
		switch {
		case j == i:
			return false // empty, or a separator that follows another or ends c
		case j == len(c):
			return true
		}
		switch c[j] {
		case '.':
			j++
		case '_':
			j++
			if j < len(c) && c[j] == '_' {
				j++
			}
		case '-':
			for j < len(c) && c[j] == '-' {
				j++
			}
		default:
			return false
		}
		i = j
	}
}

// isTag says whether t matches tagPattern.
func isTag(t string) bool {
	if len(t) == 0 || len(t) > 128 || t[0] == '.' || t[0] == '-' {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// splitTag splits "host:5000/repo:tag" into ("host:5000/repo", "tag"). A colon
// before the last slash belongs to the registry's port, not to a tag.
func splitTag(base string) (repo, tag string) {
	i := strings.LastIndex(base, ":")
	if i < 0 || strings.Contains(base[i+1:], "/") {
		return base, ""
	}
	return base[:i], base[i+1:]
}

// Registry is the normalised registry host, e.g. "index.docker.io" or "127.0.0.1:5000".
func (r Reference) Registry() string { return r.repo.RegistryStr() }

// Repository is the normalised repository path, e.g. "library/nginx".
func (r Reference) Repository() string { return r.repo.RepositoryStr() }

// Name is the normalised registry/repository, e.g. "index.docker.io/library/nginx".
func (r Reference) Name() string { return r.repo.Name() }

// Written is the repository as it was written, without tag or digest, e.g. "nginx".
func (r Reference) Written() string { return r.written }

// Tag is the tag as written, "" when none was written.
func (r Reference) Tag() string { return r.tag }

// TagOrDefault is the tag, or DefaultTag when none was written.
func (r Reference) TagOrDefault() string {
	if r.tag == "" {
		return DefaultTag
	}
	return r.tag
}

// Digest is the digest as written ("sha256:<hex>"), "" when none was written.
func (r Reference) Digest() string { return r.digest }

// IsPinned reports whether the reference names a digest.
func (r Reference) IsPinned() bool { return r.digest != "" }

// Context is the go-containerregistry repository of the reference.
func (r Reference) Context() name.Repository { return r.repo }

// Target is what a registry is asked for: the digest when there is one, else the tag
// (DefaultTag when none was written).
func (r Reference) Target() name.Reference {
	if r.digest != "" {
		return r.repo.Digest(r.digest)
	}
	return r.repo.Tag(r.TagOrDefault())
}

// String is the reference as written, normalised only in form:
// written-repository[:tag][@digest].
func (r Reference) String() string { return join(r.written, r.tag, r.digest) }

// Canonical is the fully qualified reference: registry/repository[:tag][@digest],
// with the tag defaulted when neither tag nor digest was written.
func (r Reference) Canonical() string {
	tag := r.tag
	if tag == "" && r.digest == "" {
		tag = DefaultTag
	}
	return join(r.repo.Name(), tag, r.digest)
}

// WithDigest returns the reference with its digest set to d (a "sha256:<hex>" string).
func (r Reference) WithDigest(d string) Reference {
	r.digest = d
	return r
}

// WithoutTag returns the reference without its tag.
func (r Reference) WithoutTag() Reference {
	r.tag = ""
	return r
}

func join(repo, tag, digest string) string {
	var b strings.Builder
	b.WriteString(repo)
	if tag != "" {
		b.WriteByte(':')
		b.WriteString(tag)
	}
	if digest != "" {
		b.WriteByte('@')
		b.WriteString(digest)
	}
	return b.String()
}
