package template

import (
	"fmt"

	"github.com/slipway-dev/slipway/pkg/ref"
)

// BaseReference is the parsed spec.base.
func (t *Template) BaseReference() (ref.Reference, error) {
	r, err := ref.Parse(t.Spec.Base) // a tag is the build's decision (--resolve-base), not the parser's
	if err != nil {
		return ref.Reference{}, t.fieldError("spec.base", "%v", err)
	}
	return r, nil
}

// requirePinnedBase refuses a base given by tag.
func (t *Template) requirePinnedBase(r ref.Reference) error {
	if !r.IsPinned() {
		return t.fieldError("spec.base", "%q is a tag, not a digest: pin it (repo@sha256:…) or build with --resolve-base, which records the pin", t.Spec.Base)
	}
	return nil
}

// errorf formats an error about the template as a whole.
func (t *Template) errorf(format string, args ...any) error {
	return fmt.Errorf("template %s: "+format, append([]any{t.Metadata.Name}, args...)...)
}
