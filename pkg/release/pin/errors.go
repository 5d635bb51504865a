package pin

import (
	"errors"
	"fmt"
)

// Error families: one errors.Is covers every error of the class. Errors from a
// resolver keep their own families as well (resolve.ErrNotFound and so on).
var (
	// ErrInput: a file pin refuses to read: missing, too large, not UTF-8,
	// YAML that does not parse, or excessive aliasing.
	ErrInput = errors.New("input refused")
	// ErrNoYAML: a directory in which nothing was read; an ErrInput.
	ErrNoYAML = fmt.Errorf("%w: no YAML files", ErrInput)
	// ErrConfig: a malformed PinConfig or option.
	ErrConfig = errors.New("invalid pin config")
	// ErrUnpinnable: a site that cannot be pinned: a malformed reference, a
	// kustomization image without a tag, or a resolver answer that is no digest.
	ErrUnpinnable = errors.New("cannot pin")
	// ErrRewrite: a value that cannot be rewritten in place safely (a block
	// scalar, escapes, a file that changed since it was read).
	ErrRewrite = errors.New("cannot rewrite in place")
)
