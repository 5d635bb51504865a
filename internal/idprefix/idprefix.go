package idprefix

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// MinLength is how many characters a prefix needs after the id's kind
// ("g-", "ro-", "r-", "j-") unless it is a whole id.
const MinLength = 6

// Errors, for errors.Is.
var (
	// ErrNoMatch: no id starts with the prefix.
	ErrNoMatch = errors.New("no match")
	// ErrAmbiguous: several ids start with the prefix (an *AmbiguousError
	// lists them).
	ErrAmbiguous = errors.New("ambiguous")
	// ErrTooShort: the prefix has fewer than MinLength characters after
	// its kind.
	ErrTooShort = errors.New("too short")
)

// AmbiguousError lists the ids a prefix matches.
type AmbiguousError struct {
	Prefix     string
	What       string
	Candidates []string
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%s %s is ambiguous: it matches %s", e.What, e.Prefix, strings.Join(e.Candidates, ", "))
}

// Is makes errors.Is(err, ErrAmbiguous) true.
func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

// Kind is the id's kind prefix ("g-" of "g-1a4e…"), "" when there is none.
func Kind(id string) string {
	i := strings.Index(id, "-")
	if i < 1 || i > 3 {
		return ""
	}
	return id[:i+1]
}

// Check says whether prefix is long enough to look up: MinLength
// characters after its kind, with kind the one expected.
func Check(prefix, kind, what string) error {
	rest, ok := strings.CutPrefix(prefix, kind)
	if !ok {
		return fmt.Errorf("%q is not a %s id (%s…)", prefix, what, kind)
	}
	if len(rest) < MinLength {
		return &kindError{kind: ErrTooShort, msg: fmt.Sprintf("%s %s is too short: give at least %d characters after %s", what, prefix, MinLength, kind)}
	}
	return nil
}

// Resolve returns the one id among ids that prefix starts (prefix itself
// when it is one of them). what names the kind of thing ("generation")
// and where the place looked in ("pool agents in ./config.git"), for the
// errors: ErrNoMatch, ErrTooShort, or an *AmbiguousError.
func Resolve(prefix, kind, what, where string, ids []string) (string, error) {
	if err := Check(prefix, kind, what); err != nil {
		return "", err
	}
	var found []string
	seen := map[string]bool{}
	for _, id := range ids {
		if id == prefix {
			return id, nil
		}
		if strings.HasPrefix(id, prefix) && !seen[id] {
			seen[id] = true
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return "", &kindError{kind: ErrNoMatch, msg: fmt.Sprintf("no %s matches %s in %s", what, prefix, where)}
	case 1:
		return found[0], nil
	}
	sort.Strings(found)
	return "", &AmbiguousError{Prefix: prefix, What: what, Candidates: found}
}

// kindError is an error of one of the sentinels' kinds with a message of
// its own (errors.Is matches the sentinel; the message does not repeat it).
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }
