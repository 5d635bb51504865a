package scan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sync/atomic"
	"syscall"

	"golang.org/x/sync/errgroup"
)

// Scan walks the rootfs at root, never following a symlink, and returns what
// it finds. The rootfs is read through an os.Root, so nothing outside it is
// ever opened. An unreadable directory or file is an error (ErrRootfs): a
// scan that could not look everywhere does not pass. Findings are not an
// error; use Report.Err to refuse them.
func Scan(ctx context.Context, root string, opts ...Option) (*Report, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRootfs, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrRootfs, root)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRootfs, err)
	}
	defer r.Close()

	tallies := make([]tally, o.workers+1)
	jobs := make(chan job, 4*o.workers)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(jobs)
		return walk(gctx, r, o, jobs, &tallies[0])
	})
	for i := 1; i <= o.workers; i++ {
		g.Go(func() error {
			buf := make([]byte, blockSize)
			var err error
			for j := range jobs { // drain even after an error: every job holds a directory
				if err == nil {
					if err = gctx.Err(); err == nil {
						err = scanFile(o, j, buf, &tallies[i])
					}
				}
				j.dir.release()
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("scan %s: %w", root, ctx.Err())
		}
		return nil, err
	}

	rep := &Report{}
	for _, t := range tallies {
		rep.Findings = append(rep.Findings, t.findings...)
		rep.Files += t.files
		rep.Dirs += t.dirs
		rep.Bytes += t.bytes
		rep.SkippedLarge += t.large
		rep.SkippedBinary += t.binary
		if o.values != nil {
			*o.values = append(*o.values, t.values...)
		}
	}
	rep.settle(o.allow)
	return rep, nil
}

// tally is what one goroutine found; merged after the walk.
type tally struct {
	findings                   []Finding
	files, dirs, large, binary int
	bytes                      int64
	values                     [][]byte
}

// job is one regular file to read: name in dir, at abs inside the rootfs.
type job struct {
	dir       *dirRef
	name, abs string
}

// dirRef is a directory opened as its own os.Root, so a file in it opens
// with one openat instead of a walk from the top; the walker and each queued
// job hold a reference, and the last one closes it.
type dirRef struct {
	root *os.Root
	refs atomic.Int64
}

func (d *dirRef) release() {
	if d.refs.Add(-1) == 0 {
		d.root.Close()
	}
}

// walk visits every entry under r depth first, applies the name and mode
// rules, and queues the regular files the content rules should read.
func walk(ctx context.Context, r *os.Root, o *options, jobs chan<- job, t *tally) error {
	top, err := r.Lstat(".")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRootfs, err)
	}
	t.dirs++
	checkDir(t, "/", top)
	stack := []string{"."}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		subdirs, err := walkDir(ctx, r, o, jobs, t, dir)
		if err != nil {
			return err
		}
		stack = append(stack, subdirs...)
	}
	return nil
}

// walkDir handles the entries of one directory and returns its
// subdirectories.
func walkDir(ctx context.Context, r *os.Root, o *options, jobs chan<- job, t *tally, dir string) ([]string, error) {
	prefix := "/"
	if dir != "." {
		prefix = "/" + dir + "/"
	}
	dr, err := r.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrRootfs, prefix, err)
	}
	d := &dirRef{root: dr}
	d.refs.Store(1)
	defer d.release()
	ents, err := readDir(dr, prefix)
	if err != nil {
		return nil, err
	}
	var subdirs []string
	for _, e := range ents {
		abs := prefix + e.Name()
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrRootfs, abs, err)
		}
		switch {
		case info.IsDir():
			t.dirs++
			checkDir(t, abs, info)
			subdirs = append(subdirs, abs[1:])
		case info.Mode().IsRegular():
			t.files++
			if err := checkFile(dr, o, t, e.Name(), abs, info); err != nil {
				return nil, err
			}
			switch {
			case info.Size() == 0:
			case info.Size() > o.maxSize:
				t.large++
			default:
				d.refs.Add(1)
				select {
				case jobs <- job{dir: d, name: e.Name(), abs: abs}:
				case <-ctx.Done():
					d.release()
					return nil, ctx.Err()
				}
			}
		}
	}
	return subdirs, nil
}

func readDir(dr *os.Root, abs string) ([]fs.DirEntry, error) {
	f, err := dr.Open(".")
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrRootfs, abs, err)
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrRootfs, abs, err)
	}
	return ents, nil
}

// checkDir is RuleWorldWritableDir.
func checkDir(t *tally, abs string, info fs.FileInfo) {
	m := info.Mode()
	if m.Perm()&0o002 != 0 && m&fs.ModeSticky == 0 {
		t.findings = append(t.findings, Finding{Rule: RuleWorldWritableDir, Path: abs,
			Detail: fmt.Sprintf("world-writable directory without the sticky bit (mode %04o)", unixMode(m))})
	}
}

// checkFile applies the rules about a regular file's name, mode and size;
// dr is its directory and name its name there.
func checkFile(dr *os.Root, o *options, t *tally, name, abs string, info fs.FileInfo) error {
	m := info.Mode()
	if m&(fs.ModeSetuid|fs.ModeSetgid) != 0 && !slices.ContainsFunc(o.setuid, func(g string) bool { return globMatch(g, abs) }) {
		kind := "setuid"
		switch {
		case m&fs.ModeSetuid != 0 && m&fs.ModeSetgid != 0:
			kind = "setuid and setgid"
		case m&fs.ModeSetgid != 0:
			kind = "setgid"
		}
		t.findings = append(t.findings, Finding{Rule: RuleSetuid, Path: abs,
			Detail: fmt.Sprintf("%s file outside the allow-list (mode %04o)", kind, unixMode(m))})
	}
	if ok, _ := path.Match("/etc/ssh/ssh_host_*_key", abs); ok {
		t.findings = append(t.findings, Finding{Rule: RuleSSHHostKey, Path: abs,
			Detail: "SSH host key in the image; host keys are per clone (refresh: ssh-host-keys)"})
	}
	if (abs == "/etc/machine-id" || abs == "/var/lib/dbus/machine-id") && info.Size() > 0 {
		if info.Size() == int64(len(uninitialized)) {
			b, err := dr.ReadFile(name)
			if err != nil {
				return fmt.Errorf("%w: %s: %w", ErrRootfs, abs, err)
			}
			if string(b) == uninitialized {
				return nil
			}
		}
		t.findings = append(t.findings, Finding{Rule: RuleMachineID, Path: abs,
			Detail: fmt.Sprintf("machine id is set (%d bytes); it must be empty so each clone gets its own (refresh: machine-id)", info.Size())})
	}
	return nil
}

// uninitialized is systemd's first-boot marker for /etc/machine-id.
const uninitialized = "uninitialized\n"

// unixMode is the classic octal mode, special bits included.
func unixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}

// scanFile runs the content rules over one file. Opening goes through the
// os.Root (a symlink swapped in cannot lead outside) with O_NONBLOCK (a FIFO
// swapped in cannot block), and anything but a regular file within the size
// limit is left alone.
func scanFile(o *options, j job, buf []byte, t *tally) error {
	f, err := j.dir.root.OpenFile(j.name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrRootfs, j.abs, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrRootfs, j.abs, err)
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	if fi.Size() > o.maxSize {
		t.large++
		return nil
	}
	name := path.Base(j.abs)
	s := contentScanner{path: j.abs, config: configFile(name)}
	if o.values != nil {
		s.values = &t.values
	}
	in := io.LimitReader(f, o.maxSize)
	if dockerConfigFile(name) {
		b, err := io.ReadAll(in)
		t.bytes += int64(len(b))
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrRootfs, j.abs, err)
		}
		if bytes.IndexByte(b[:min(len(b), sniffSize)], 0) >= 0 {
			t.binary++
			return nil
		}
		s.scanBytes(b)
		t.findings = append(t.findings, s.out...)
		t.findings = append(t.findings, checkDockerConfig(j.abs, b, name == ".dockercfg", s.values)...)
		return nil
	}
	n, err := s.scan(in, buf, overlap, true)
	t.bytes += n
	switch {
	case errors.Is(err, errBinary):
		t.binary++
		return nil
	case err != nil:
		return fmt.Errorf("%w: %s: %w", ErrRootfs, j.abs, err)
	}
	t.findings = append(t.findings, s.out...)
	return nil
}
