package secretfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ErrMissing is the family of errors a later read may not have: the file
// does not exist yet, or is empty (its Secret is not created, or lacks the
// key). Callers wait and read again; other errors are for a person to fix.
var ErrMissing = errors.New("not there yet")

// Mounts says which Secret is mounted at which directory (absolute,
// cleaned): where a file under it comes from.
type Mounts map[string]string

// ParseMounts reads DIR=SECRET pairs separated by commas, as
// $SLIPWAY_SECRET_MOUNTS holds them ("" is none).
func ParseMounts(s string) (Mounts, error) {
	m := Mounts{}
	for pair := range strings.SplitSeq(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		dir, secret, ok := strings.Cut(pair, "=")
		dir, secret = strings.TrimSpace(dir), strings.TrimSpace(secret)
		if !ok || !filepath.IsAbs(dir) || secret == "" || strings.ContainsAny(secret, " /=") {
			return nil, fmt.Errorf("secret mounts: %q: want DIR=SECRET with an absolute DIR and a Secret's name", pair)
		}
		dir = filepath.Clean(dir)
		if prev, dup := m[dir]; dup && prev != secret {
			return nil, fmt.Errorf("secret mounts: %s is named twice (Secrets %s and %s)", dir, prev, secret)
		}
		m[dir] = secret
	}
	return m, nil
}

// Origin is where file comes from: "Secret NAME, key KEY" when it lies
// under a mount (the key is its path below the mount), else "".
func (m Mounts) Origin(file string) string {
	abs, err := filepath.Abs(file)
	if err != nil {
		return ""
	}
	dirs := make([]string, 0, len(m))
	for d := range m {
		dirs = append(dirs, d)
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) }) // the deepest mount first
	for _, d := range dirs {
		if rel, err := filepath.Rel(d, abs); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			return "Secret " + m[d] + ", key " + filepath.ToSlash(rel)
		}
	}
	return ""
}

// Read returns file's content without surrounding white space. A file
// that does not exist or is empty is an ErrMissing naming the file and,
// under a mount, its Secret and key. The content is never in an error.
func (m Mounts) Read(file string) (string, error) {
	from := ""
	if o := m.Origin(file); o != "" {
		from = " (" + o + ")"
	}
	b, err := os.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		why := "does not exist"
		if from != "" {
			why += ": the Secret is not created, or has no such key"
		}
		return "", missing("file " + file + from + " " + why)
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is said once, below
		}
		return "", fmt.Errorf("file %s%s: %w", file, from, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", missing("file " + file + from + " is empty")
	}
	return s, nil
}

// missing is an ErrMissing that says no more than its text.
type missing string

func (e missing) Error() string        { return string(e) }
func (e missing) Is(target error) bool { return target == ErrMissing }
