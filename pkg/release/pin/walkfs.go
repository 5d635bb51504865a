package pin

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// candidate is a file to read: path as shown to the user, real where it
// lives; walked when a directory walk found it, rather than named.
type candidate struct {
	path, real string
	walked     bool
}

// walk is what collect found under one root.
type walk struct {
	cands   []candidate
	skipped []Skipped
	notYAML map[string]int // by extension
}

// collect lists the files under root. root itself is taken as given (a
// symlink to a file or directory is followed); nothing below it is. Hidden
// directories are walked only when hidden says so, version control
// metadata never.
func collect(ctx context.Context, root string, hidden bool) (*walk, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", root, ErrInput, unwrapPath(err))
	}
	real, err := filepath.EvalSymlinks(root)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", root, ErrInput, unwrapPath(err))
	}
	wk := &walk{}
	if !fi.IsDir() {
		wk.cands = []candidate{{path: root, real: real}}
		return wk, nil
	}
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
			wk.skipped = append(wk.skipped, Skipped{Path: shown, Reason: symlinkReason(real, p), Kind: SkipSymlink})
		case d.IsDir():
			switch name := d.Name(); {
			case name == ".git" || name == ".hg" || name == ".svn":
				wk.skipped = append(wk.skipped, Skipped{Path: shown, Reason: "version control metadata, never walked", Kind: SkipHidden})
				return filepath.SkipDir
			case strings.HasPrefix(name, ".") && !hidden:
				wk.skipped = append(wk.skipped, Skipped{Path: shown, Reason: "hidden directory, not walked", Kind: SkipHidden})
				return filepath.SkipDir
			}
		case !isYAMLName(d.Name()):
			if wk.notYAML == nil {
				wk.notYAML = map[string]int{}
			}
			wk.notYAML[strings.ToLower(filepath.Ext(d.Name()))]++
		case !d.Type().IsRegular():
			wk.skipped = append(wk.skipped, Skipped{Path: shown, Reason: "not a regular file", Kind: SkipSpecial})
		default:
			wk.cands = append(wk.cands, candidate{path: shown, real: p, walked: true})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", root, ErrInput, err)
	}
	return wk, nil
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
