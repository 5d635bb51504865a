package generation

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/slipway-dev/slipway/pkg/ref"
)

// Limits on a pin's strings.
const (
	maxID    = 1024
	maxRepo  = 2048
	maxLabel = 256
)

// Pin is one artifact's immutable identity in a generation: exactly one of
// Image, Git and ID is set, in a form the artifact kind allows
// (Kind.Forms). Tags are names, identities are digests, commits and ids:
// a pin keeps the human tag beside the identity, and only the identity is
// trusted.
type Pin struct {
	// Image is an OCI reference with its digest, in canonical form:
	// registry/repository[:tag]@sha256:<64 hex> (ref.Reference.Canonical).
	// The tag, if any, is kept for humans.
	Image string `yaml:"image,omitempty" json:"image,omitempty"`
	// Git is a commit of a git repository.
	Git *GitPin `yaml:"git,omitempty" json:"git,omitempty"`
	// ID is an opaque immutable id: an AMI id, a runtime class revision, a
	// model's content hash, the path and version of a secret (never its
	// value). The id must not be reusable for other content; this package
	// cannot check that.
	ID string `yaml:"id,omitempty" json:"id,omitempty"`
	// Name and Tag label an ID pin for humans: the artifact's name and the
	// tag it came from. An image pin carries both in Image, a git pin in Git.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	Tag  string `yaml:"tag,omitempty" json:"tag,omitempty"`
}

// GitPin is a commit of a git repository.
type GitPin struct {
	// Repo is where the commit can be fetched (a URL or scp-like address).
	Repo string `yaml:"repo" json:"repo"`
	// Commit is the full commit id: 40 (SHA-1) or 64 (SHA-256) lower-case hex digits.
	Commit string `yaml:"commit" json:"commit"`
	// Ref is the branch or tag the commit was taken from, for humans.
	Ref string `yaml:"ref,omitempty" json:"ref,omitempty"`
}

// Form says which of Image, Git and ID is set; "" when none or several are.
func (p Pin) Form() Form {
	var f Form
	n := 0
	if p.Image != "" {
		f, n = FormImage, n+1
	}
	if p.Git != nil {
		f, n = FormGit, n+1
	}
	if p.ID != "" {
		f, n = FormID, n+1
	}
	if n != 1 {
		return ""
	}
	return f
}

// IsZero reports whether p is the zero Pin (no pin).
func (p Pin) IsZero() bool { return p.Equal(Pin{}) }

// Equal reports whether p and o are the same pin, labels included.
func (p Pin) Equal(o Pin) bool {
	if (p.Git == nil) != (o.Git == nil) || (p.Git != nil && *p.Git != *o.Git) {
		return false
	}
	return p.Image == o.Image && p.ID == o.ID && p.Name == o.Name && p.Tag == o.Tag
}

// Identity is what the pin trusts: the image's digest ("sha256:<hex>"),
// the git commit, or the id.
func (p Pin) Identity() string {
	switch p.Form() {
	case FormImage:
		if r, err := ref.Parse(p.Image); err == nil {
			return r.Digest()
		}
	case FormGit:
		return p.Git.Commit
	case FormID:
		return p.ID
	}
	return ""
}

// HumanTag is the tag the pin came from, never trusted: the image's tag,
// the git ref, or Tag of an id pin; "" when there is none.
func (p Pin) HumanTag() string {
	switch p.Form() {
	case FormImage:
		if r, err := ref.Parse(p.Image); err == nil {
			return r.Tag()
		}
	case FormGit:
		return p.Git.Ref
	case FormID:
		return p.Tag
	}
	return ""
}

// ArtifactName names the artifact: the image's registry/repository, the
// git repository, or Name of an id pin ("" when unnamed).
func (p Pin) ArtifactName() string {
	switch p.Form() {
	case FormImage:
		if r, err := ref.Parse(p.Image); err == nil {
			return r.Name()
		}
	case FormGit:
		return p.Git.Repo
	case FormID:
		return p.Name
	}
	return ""
}

// String is a stable one-line display: the image reference as written;
// "repo@commit (ref)" for a git pin; "id (name:tag)" for an id pin, the
// parenthesis only when there are labels.
func (p Pin) String() string {
	switch p.Form() {
	case FormImage:
		return p.Image
	case FormGit:
		s := p.Git.Repo + "@" + p.Git.Commit
		if p.Git.Ref != "" {
			s += " (" + p.Git.Ref + ")"
		}
		return s
	case FormID:
		label := p.Name
		if p.Tag != "" {
			label += ":" + p.Tag
		}
		if label == "" {
			return p.ID
		}
		return p.ID + " (" + label + ")"
	case "":
		if p.IsZero() {
			return "(none)"
		}
	}
	return fmt.Sprintf("(invalid pin: image %q, git %v, id %q)", p.Image, p.Git != nil, p.ID)
}

// clone returns p with its own copy of Git.
func (p Pin) clone() Pin {
	if p.Git != nil {
		g := *p.Git
		p.Git = &g
	}
	return p
}

// normalize writes p in the one spelling Parse accepts: an image in
// canonical form, a commit in lower case. What does not parse is left for
// check to report.
func (p Pin) normalize() Pin {
	p = p.clone()
	if p.Image != "" {
		if r, err := ref.Parse(p.Image); err == nil && r.IsPinned() {
			p.Image = r.Canonical()
		}
	}
	if p.Git != nil {
		p.Git.Commit = strings.ToLower(p.Git.Commit)
	}
	return p
}

var (
	sha256Digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	commitHex    = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)
)

// problem is a refusal of a field below a pin: sub is ".image", ".git.commit", ….
type problem struct {
	sub, msg string
}

func refuse(sub, format string, args ...any) *problem {
	return &problem{sub: sub, msg: fmt.Sprintf(format, args...)}
}

// check validates p as a pin of kind k.
func (p Pin) check(k Kind) *problem {
	var set []string
	if p.Image != "" {
		set = append(set, "image")
	}
	if p.Git != nil {
		set = append(set, "git")
	}
	if p.ID != "" {
		set = append(set, "id")
	}
	switch len(set) {
	case 0:
		return refuse("", "empty pin: %s is pinned by %s", k, formList(k.Forms()))
	case 1:
	case 2:
		return refuse("", "both %s set: a pin has one identity", strings.Join(set, " and "))
	default:
		return refuse("", "image, git and id all set: a pin has one identity")
	}
	f := p.Form()
	if !slices.Contains(k.Forms(), f) {
		return refuse("."+string(f), "%s is pinned by %s, not %s", k, formList(k.Forms()), f)
	}
	if f != FormID {
		switch {
		case p.Name != "":
			return refuse(".name", "name labels an id pin only; %s", carries(f))
		case p.Tag != "":
			return refuse(".tag", "tag labels an id pin only; %s", carries(f))
		}
	}
	switch f {
	case FormImage:
		return checkImage(p.Image)
	case FormGit:
		return checkGit(p.Git)
	default:
		if msg := checkToken(p.ID, maxID); msg != "" {
			return refuse(".id", "%s", msg)
		}
		if msg := checkLabel(p.Name); msg != "" {
			return refuse(".name", "%s", msg)
		}
		if msg := checkLabel(p.Tag); msg != "" {
			return refuse(".tag", "%s", msg)
		}
	}
	return nil
}

func carries(f Form) string {
	if f == FormImage {
		return "an image carries its name and tag in the reference"
	}
	return "a git pin carries its ref in git.ref"
}

func checkImage(s string) *problem {
	r, err := ref.Parse(s)
	if err != nil {
		return refuse(".image", "%v", err)
	}
	if !r.IsPinned() {
		return refuse(".image", "%q is a tag: pin it by digest (slipway pin)", s)
	}
	if !sha256Digest.MatchString(r.Digest()) {
		return refuse(".image", "%q: digest %q is not sha256:<64 hex>", s, r.Digest())
	}
	if c := r.Canonical(); c != s {
		return refuse(".image", "%q is not in canonical form: write %q", s, c)
	}
	return nil
}

func checkGit(g *GitPin) *problem {
	if g.Repo == "" {
		return refuse(".git.repo", "required: where the commit can be fetched")
	}
	if msg := checkToken(g.Repo, maxRepo); msg != "" {
		return refuse(".git.repo", "%s", msg)
	}
	if !commitHex.MatchString(g.Commit) {
		return refuse(".git.commit", "%q is not a commit id (40 or 64 lower-case hex digits): resolve a branch or tag to its commit", g.Commit)
	}
	if g.Ref != "" {
		if msg := checkToken(g.Ref, maxLabel); msg != "" {
			return refuse(".git.ref", "%s", msg)
		}
	}
	return nil
}

// checkToken refuses an empty, over-long, non-UTF-8 string or one with
// white space or control characters.
func checkToken(s string, max int) string {
	switch {
	case s == "":
		return "empty"
	case len(s) > max:
		return fmt.Sprintf("%d bytes, over the limit of %d", len(s), max)
	case !utf8.ValidString(s):
		return fmt.Sprintf("%q is not UTF-8", s)
	case strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return fmt.Sprintf("%q contains white space or control characters", s)
	}
	return ""
}

// checkLabel refuses an over-long, non-UTF-8 label, one with control
// characters or with white space at either end; "" is allowed.
func checkLabel(s string) string {
	switch {
	case s == "":
		return ""
	case len(s) > maxLabel:
		return fmt.Sprintf("%d bytes, over the limit of %d", len(s), maxLabel)
	case !utf8.ValidString(s):
		return fmt.Sprintf("%q is not UTF-8", s)
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return fmt.Sprintf("%q contains control characters", s)
	case strings.TrimSpace(s) != s:
		return fmt.Sprintf("%q has white space at an end", s)
	}
	return ""
}
