package pin

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// candidate is a file to read: path as shown to the user, real where it lives.
type candidate struct {
	path, real string
}

// collect lists the files under root. root itself is taken as given (a
// symlink to a file or directory is followed); nothing below it is.
func collect(ctx context.Context, root string) ([]candidate, []Skipped, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w: %w", root, ErrInput, unwrapPath(err))
	}
	real, err := filepath.EvalSymlinks(root)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w: %w", root, ErrInput, unwrapPath(err))
	}
	if !fi.IsDir() {
		return []candidate{{path: root, real: real}}, nil, nil
	}
	var cands []candidate
	var skipped []Skipped
	err = filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if p == real {
			return nil
		}
		rel, err := filepath.Rel(real, p)
		if err != nil {
			return err
		}
		shown := filepath.Join(root, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			skipped = append(skipped, Skipped{Path: shown, Reason: symlinkReason(real, p)})
		case d.IsDir():
			if strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
		case !isYAMLName(d.Name()):
		case !d.Type().IsRegular():
			skipped = append(skipped, Skipped{Path: shown, Reason: "not a regular file"})
		default:
			cands = append(cands, candidate{path: shown, real: p})
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w: %w", root, ErrInput, err)
	}
	return cands, skipped, nil
}

func isYAMLName(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	return ext == ".yaml" || ext == ".yml" || name == "Kustomization"
}

// symlinkReason says why a symlink found in a walk was not followed, and
// whether it leaves the tree.
func symlinkReason(root, link string) string {
	target, err := filepath.EvalSymlinks(link)
	if err != nil {
		return "symlink not followed (its target cannot be resolved)"
	}
	rel, err := filepath.Rel(root, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "symlink leaving the tree (to " + target + ") not followed"
	}
	return "symlink not followed"
}
