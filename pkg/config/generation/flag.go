package generation

import (
	"fmt"
	"slices"
	"strings"

	"github.com/slipway-dev/slipway/pkg/ref"
)

// ParsePin reads a pin written KIND=VALUE on a command line:
//
//   - an image kind: a reference with a digest (a tag is refused);
//   - policy: REPO@COMMIT[#REF], the ref a label for humans;
//   - secretVersion: the secret's path and version as the secret store
//     spells them, the whole value the id ("vault://kv/agents/token#3"):
//     the version is part of the identity, never a tag;
//   - the other id kinds: ID[#TAG], the tag a label for humans (image or id
//     where both are allowed: a value with "@sha256:" is an image).
//
// KIND is either spelling ParseKind accepts. The pin is not validated
// further here (New does that). Errors wrap ErrInvalid or ref's errors.
func ParsePin(s string) (Kind, Pin, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || v == "" {
		return "", Pin{}, fmt.Errorf("%w: pin %q: want KIND=VALUE", ErrInvalid, s)
	}
	kind, err := ParseKind(k)
	if err != nil {
		return "", Pin{}, fmt.Errorf("pin %q: %w", s, err)
	}
	forms := kind.Forms()
	switch {
	case slices.Contains(forms, FormGit):
		val, gitRef, _ := strings.Cut(v, "#")
		at := strings.LastIndex(val, "@")
		if at <= 0 {
			return "", Pin{}, fmt.Errorf("%w: pin %q: want %s=REPO@COMMIT[#REF]", ErrInvalid, s, kind)
		}
		return kind, Pin{Git: &GitPin{Repo: val[:at], Commit: val[at+1:], Ref: gitRef}}, nil
	case slices.Contains(forms, FormImage) && (strings.Contains(v, "@sha256:") || !slices.Contains(forms, FormID)):
		r, err := ref.Parse(v)
		if err != nil {
			return "", Pin{}, fmt.Errorf("pin %q: %w", s, err)
		}
		if !r.IsPinned() {
			return "", Pin{}, fmt.Errorf("%w: pin %q: %s is a tag, not a digest: pin it first (slipway resolve / slipway pin)", ErrInvalid, s, v)
		}
		return kind, Pin{Image: r.Canonical()}, nil
	case kind == SecretVersion:
		return kind, Pin{ID: v}, nil
	default:
		id, tag, _ := strings.Cut(v, "#")
		return kind, Pin{ID: id, Tag: tag}, nil
	}
}
