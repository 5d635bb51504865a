package rootfs

import (
	"errors"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Error families: one errors.Is covers every error of the class.
var (
	// ErrUnsafeEntry: a layer entry that Extract refuses to apply: an absolute
	// path or a ".." component, a path through a symlink or a non-directory, a
	// hardlink to a missing, absolute, "..", symlink or directory target, a
	// device node, an unknown entry type, or a NUL in a name.
	ErrUnsafeEntry = errors.New("unsafe layer entry")
	// ErrLimit: a size limit was exceeded (total bytes, entry count or name
	// length); the message names the limit.
	ErrLimit = errors.New("extraction limit exceeded")
	// ErrTarget: the directory to extract into is not an empty directory.
	ErrTarget = errors.New("invalid target directory")
	// ErrUnsupported: Diff met an entry a layer cannot carry: a device node, or
	// a name beginning with ".wh." (it would read as a whiteout).
	ErrUnsupported = errors.New("entry cannot be stored in a layer")
	// ErrOption: an invalid or contradictory option.
	ErrOption = errors.New("invalid option")
)

// EntryError is the error Extract returns for a refused or failed entry. It
// names the layer by index (0 is the bottom layer) and digest, and the entry
// by its name as written in the tar stream (for a stream that does not read
// as tar, the last entry read, "" if none). Err wraps one of the sentinels
// above or the underlying system error.
type EntryError struct {
	Layer  int
	Digest v1.Hash // zero when the layer could not say
	Name   string
	Err    error
}

func (e *EntryError) Error() string {
	d := "digest unknown"
	if e.Digest != (v1.Hash{}) {
		d = e.Digest.String()
	}
	return fmt.Sprintf("layer %d (%s): entry %q: %v", e.Layer, d, e.Name, e.Err)
}

func (e *EntryError) Unwrap() error { return e.Err }

// unsafe returns an error of the ErrUnsafeEntry family with a reason.
func unsafe(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsafeEntry, fmt.Sprintf(format, args...))
}
