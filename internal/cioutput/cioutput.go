package cioutput

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Format names a CI system's form.
type Format string

// The forms, and None (write nothing) and Auto (detect from the environment).
const (
	None   Format = "none"
	Auto   Format = "auto"
	GitHub Format = "github"
	Tekton Format = "tekton"
	GitLab Format = "gitlab"
)

// ParseFormat reads a --ci value; "" is None.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case "":
		return None, nil
	case None, Auto, GitHub, Tekton, GitLab:
		return f, nil
	}
	return "", fmt.Errorf("cioutput: unknown CI form %q: want none, auto, github, tekton or gitlab", s)
}

// Detect picks the form of the CI system the process runs in: GitHub Actions
// sets GITHUB_ACTIONS=true, GitLab CI sets GITLAB_CI=true. Tekton sets no such
// variable, so it is chosen only when tektonResults (a results directory the
// caller was given) is not empty. None when nothing matches.
func Detect(getenv func(string) string, tektonResults string) Format {
	switch {
	case getenv("GITHUB_ACTIONS") == "true":
		return GitHub
	case getenv("GITLAB_CI") == "true":
		return GitLab
	case tektonResults != "":
		return Tekton
	}
	return None
}

// Step is what one step tells the CI system.
type Step struct {
	// Title heads the summary ("slipway lint").
	Title string
	// Outputs are the step's named values, in order. Names are letters,
	// digits, - and _, starting with a letter (digest, template-id).
	Outputs []Output
	// Image, if set, is the image the step published (Tekton's IMAGE_URL and
	// IMAGE_DIGEST results).
	Image *Image
	// Details are extra summary lines (one finding, one failed check).
	Details []string
	// Annotations are findings at a place in a file, or errors with none.
	Annotations []Annotation
}

// Output is one named value.
type Output struct {
	Name  string
	Value string
}

// Image is a published image: URL is the repository (with a tag, if any,
// and no digest), Digest "sha256:...".
type Image struct {
	URL    string
	Digest string
}

// Level is an annotation's severity.
type Level string

// Levels of an annotation (GitHub's workflow command names).
const (
	Error   Level = "error"
	Warning Level = "warning"
	Notice  Level = "notice"
)

// Annotation is a message, at a place in a file when File is set.
type Annotation struct {
	Level   Level
	File    string
	Line    int
	Col     int
	Title   string
	Message string
	// Check names the rule that found it (slipway/mutable-image-reference):
	// GitLab's code-quality check_name. "" is "slipway".
	Check string
}

// ErrInvalid marks a step that cannot be written in the form asked for: a
// bad output name, a value the form cannot hold.
var ErrInvalid = errors.New("cioutput: invalid")

var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

func (s Step) check() error {
	seen := map[string]bool{}
	for _, o := range s.Outputs {
		if !nameRE.MatchString(o.Name) {
			return fmt.Errorf("%w: output name %q: want a letter then letters, digits, - or _", ErrInvalid, o.Name)
		}
		if up := envName(o.Name); seen[up] {
			return fmt.Errorf("%w: output %q given twice (as %s)", ErrInvalid, o.Name, up)
		} else {
			seen[up] = true
		}
	}
	for _, a := range s.Annotations {
		switch a.Level {
		case Error, Warning, Notice:
		default:
			return fmt.Errorf("%w: annotation level %q", ErrInvalid, a.Level)
		}
	}
	return nil
}

// envName is an output name as Tekton results and dotenv keys spell it.
func envName(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}
