package scan

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
)

// match is a path a scrub rule selected.
type match struct {
	abs  string      // inside the rootfs: /etc/machine-id
	rel  string      // name in the os.Root: etc/machine-id
	info fs.FileInfo // from Lstat
	rule scrubRule
}

type scrubber struct {
	root    *os.Root
	keep    []string
	entries []ScrubEntry
	skipped map[string]bool
}

func (s *scrubber) add(abs string, a ScrubAction, rule string) {
	s.entries = append(s.entries, ScrubEntry{Path: abs, Action: a, Rule: rule})
}

func (s *scrubber) report() *ScrubReport {
	slices.SortFunc(s.entries, func(a, b ScrubEntry) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(string(a.Action), string(b.Action)))
	})
	if s.entries == nil {
		s.entries = []ScrubEntry{}
	}
	return &ScrubReport{Entries: s.entries}
}

func joinRel(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// expand resolves a rule's pattern element by element from the root,
// descending only into real directories (Lstat): a symlink met before the
// last element is reported as skipped and not followed.
func (s *scrubber) expand(rule scrubRule) ([]match, error) {
	elems := strings.Split(strings.TrimPrefix(rule.pattern, "/"), "/")
	dirs := []string{"."}
	var out []match
	for i, el := range elems {
		last := i == len(elems)-1
		var next []string
		for _, dir := range dirs {
			if el == "**" {
				if err := s.descend(dir, rule, &out); err != nil {
					return nil, err
				}
				continue
			}
			names, err := s.names(dir, el)
			if err != nil {
				return nil, err
			}
			for _, name := range names {
				rel := joinRel(dir, name)
				info, err := s.root.Lstat(rel)
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("%w: /%s: %w", ErrRootfs, rel, err)
				}
				switch {
				case last:
					if err := s.pick(rule, rel, info, &out); err != nil {
						return nil, err
					}
				case info.Mode()&fs.ModeSymlink != 0:
					if !s.skipped["/"+rel] {
						s.skipped["/"+rel] = true
						s.add("/"+rel, ScrubSkipped, rule.name)
					}
				case info.IsDir():
					next = append(next, rel)
				}
			}
		}
		dirs = next
	}
	return out, nil
}

func (s *scrubber) pick(rule scrubRule, rel string, info fs.FileInfo, out *[]match) error {
	if rule.filter != nil {
		ok, err := rule.filter(s.root, rel, info)
		if err != nil {
			return fmt.Errorf("%w: /%s: %w", ErrRootfs, rel, err)
		}
		if !ok {
			return nil
		}
	}
	*out = append(*out, match{abs: "/" + rel, rel: rel, info: info, rule: rule})
	return nil
}

// names lists the children of dir that el matches: el itself when it has no
// glob characters, else the entries path.Match accepts.
func (s *scrubber) names(dir, el string) ([]string, error) {
	if !strings.ContainsAny(el, `*?[\`) {
		return []string{el}, nil
	}
	ents, err := s.readDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if ok, _ := path.Match(el, e.Name()); ok {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func (s *scrubber) readDir(dir string) ([]fs.DirEntry, error) {
	f, err := s.root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: /%s: %w", ErrRootfs, dir, err)
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("%w: /%s: %w", ErrRootfs, dir, err)
	}
	return ents, nil
}

// descend picks everything below dir, never entering a symlink.
func (s *scrubber) descend(dir string, rule scrubRule, out *[]match) error {
	ents, err := s.readDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		rel := joinRel(dir, e.Name())
		info, err := e.Info()
		if err != nil {
			return fmt.Errorf("%w: /%s: %w", ErrRootfs, rel, err)
		}
		if err := s.pick(rule, rel, info, out); err != nil {
			return err
		}
		if info.IsDir() {
			if err := s.descend(rel, rule, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// kept reports whether p is at or below a keep path.
func (s *scrubber) kept(p string) bool {
	return slices.ContainsFunc(s.keep, func(k string) bool { return under(p, k) })
}

// holdsKept reports whether a keep path lies strictly below p.
func (s *scrubber) holdsKept(p string) bool {
	return slices.ContainsFunc(s.keep, func(k string) bool { return k != p && under(k, p) })
}

func (s *scrubber) apply(c match) error {
	switch {
	case s.kept(c.abs):
		s.add(c.abs, ScrubKept, c.rule.name)
		return nil
	case c.rule.action == ScrubEmptied:
		return s.empty(c)
	case c.info.IsDir() && s.holdsKept(c.abs):
		return s.removeAround(c.rel, c.abs, c.rule.name)
	default:
		return s.remove(c.rel, c.abs, c.info, c.rule.name)
	}
}

func (s *scrubber) remove(rel, abs string, info fs.FileInfo, rule string) error {
	var err error
	if info.IsDir() {
		err = s.root.RemoveAll(rel)
	} else {
		err = s.root.Remove(rel) // a symlink goes itself, its target stays
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: remove %s: %w", ErrRootfs, abs, err)
	}
	s.add(abs, ScrubRemoved, rule)
	return nil
}

// removeAround removes everything in a directory except the keep paths
// below it, and the directories leading to them.
func (s *scrubber) removeAround(rel, abs, rule string) error {
	ents, err := s.readDir(rel)
	if err != nil {
		return err
	}
	for _, e := range ents {
		crel, cabs := joinRel(rel, e.Name()), path.Join(abs, e.Name())
		info, err := e.Info()
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrRootfs, cabs, err)
		}
		switch {
		case s.kept(cabs):
			s.add(cabs, ScrubKept, rule)
		case info.IsDir() && s.holdsKept(cabs):
			err = s.removeAround(crel, cabs, rule)
		default:
			err = s.remove(crel, cabs, info, rule)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// empty truncates a non-empty regular file to zero bytes, checking that the
// file opened is the one Lstat saw (no symlink or FIFO swapped in).
func (s *scrubber) empty(c match) error {
	if !c.info.Mode().IsRegular() || c.info.Size() == 0 {
		return nil
	}
	f, err := s.root.OpenFile(c.rel, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("%w: empty %s: %w", ErrRootfs, c.abs, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%w: empty %s: %w", ErrRootfs, c.abs, err)
	}
	if !os.SameFile(fi, c.info) {
		return fmt.Errorf("%w: empty %s: the file changed while scrubbing", ErrRootfs, c.abs)
	}
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("%w: empty %s: %w", ErrRootfs, c.abs, err)
	}
	s.add(c.abs, ScrubEmptied, c.rule.name)
	return nil
}
