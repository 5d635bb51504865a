package runner

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrWorkspace: a workspace could not be copied out of or restored into
// a sandbox; the message names the entry at fault.
var ErrWorkspace = errors.New("runner: workspace")

// WriteWorkspaceTar writes the tree below dir (dir itself excluded) to w
// as one uncompressed tar stream, parents before children, names relative
// to dir: directories, regular files (a hard link as a file of its own)
// and symbolic links (never followed). What a tar entry cannot carry or a
// restore would refuse (sockets, named pipes, devices) and what is on
// another file system (a mount point below dir) is left out and passed to
// left with why. It is run inside a sandbox (`slipway-runner workspace
// tar`), so whoever reads the stream treats it as untrusted. It returns
// how many entries it wrote.
func WriteWorkspaceTar(dir string, w io.Writer, left func(name, why string)) (int, error) {
	var root unix.Stat_t
	if err := unix.Lstat(dir, &root); err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrWorkspace, dir, err)
	}
	if root.Mode&unix.S_IFMT != unix.S_IFDIR {
		return 0, fmt.Errorf("%w: %s is not a directory", ErrWorkspace, dir)
	}
	tw := tar.NewWriter(w)
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		name := filepath.ToSlash(rel)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		if st.Dev != root.Dev {
			left(name, "on another file system")
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case d.IsDir(), d.Type().IsRegular():
		case d.Type()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			left(name, "a "+d.Type().String())
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name, hdr.Uname, hdr.Gname = name, "", ""
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.Format = tar.FormatPAX // nanosecond times
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		n++
		if !d.Type().IsRegular() {
			return nil
		}
		return copyFileInto(tw, p, hdr.Size)
	})
	if err != nil {
		return n, fmt.Errorf("%w: copy %s: %v", ErrWorkspace, dir, err)
	}
	if err := tw.Close(); err != nil {
		return n, fmt.Errorf("%w: copy %s: %v", ErrWorkspace, dir, err)
	}
	return n, nil
}

// copyFileInto copies exactly size bytes of the regular file p (never
// through a symlink) into w: a file that shrank since it was listed fails
// the copy, naming it.
func copyFileInto(w io.Writer, p string, size int64) error {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if c, err := io.CopyN(w, f, size); err != nil {
		return fmt.Errorf("%s: changed while copied (%d of %d bytes): %v", p, c, size, err)
	}
	return nil
}

// RestoreReport says what RestoreWorkspace wrote.
type RestoreReport struct {
	Removed  int   `json:"removed"` // entries of the workspace removed first
	Dirs     int   `json:"dirs"`
	Files    int   `json:"files"`
	Symlinks int   `json:"symlinks"`
	Bytes    int64 `json:"bytes"`
}

// RestoreWorkspace empties dir (the directory stays: it is the pod's
// workspace volume) and unpacks the tar stream r into it, as the running
// user: directories, regular files and symbolic links only, with their
// permission bits (without setuid, setgid or sticky) and modification
// times. No entry may be absolute, hold "..", go through a symbolic link
// or stand where another entry already is; a device, a hard link or any
// other kind is refused, naming it. The runtime builds the stream from a
// verified checkpoint; these checks are the sandbox's own. On error dir
// holds a part of the stream: the runtime deletes such a sandbox.
func RestoreWorkspace(dir string, r io.Reader) (*RestoreReport, error) {
	rep := &RestoreReport{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return rep, fmt.Errorf("%w: restore into %s: %v", ErrWorkspace, dir, err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return rep, fmt.Errorf("%w: empty %s: %v", ErrWorkspace, dir, err)
		}
		rep.Removed++
	}
	type dirMeta struct {
		path  string
		mode  os.FileMode
		mtime time.Time
	}
	var dirs []dirMeta
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return rep, fmt.Errorf("%w: restore into %s: read: %v", ErrWorkspace, dir, err)
		}
		name, err := restoreName(hdr.Name)
		if err == nil && name == "." && hdr.Typeflag != tar.TypeDir {
			err = errors.New("the root may only be a directory")
		}
		if err == nil && name != "." {
			err = realParents(dir, name)
		}
		if err != nil {
			return rep, fmt.Errorf("%w: restore entry %q: %v", ErrWorkspace, hdr.Name, err)
		}
		if name == "." {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		perm := os.FileMode(hdr.Mode) & 0o777
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.Mkdir(p, 0o700)
			// a folder keeps its setgid and sticky bits (an emptyDir of a
			// pod with an fsGroup is 2775); a file never gets setuid or
			// setgid from a checkpoint
			dm := perm | hdr.FileInfo().Mode()&(os.ModeSetgid|os.ModeSticky)
			dirs = append(dirs, dirMeta{p, dm, hdr.ModTime})
			rep.Dirs++
		case tar.TypeReg:
			err = writeRestored(p, tr, hdr.Size, perm)
			if err == nil {
				err = os.Chtimes(p, hdr.ModTime, hdr.ModTime)
			}
			rep.Files++
			rep.Bytes += hdr.Size
		case tar.TypeSymlink:
			err = os.Symlink(hdr.Linkname, p)
			if err == nil {
				ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
				err = unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW)
			}
			rep.Symlinks++
		case tar.TypeChar, tar.TypeBlock:
			err = errors.New("device node refused")
		default:
			err = fmt.Errorf("entry type %q refused (directories, regular files and symbolic links only)", hdr.Typeflag)
		}
		if err != nil {
			return rep, fmt.Errorf("%w: restore entry %q: %v", ErrWorkspace, hdr.Name, err)
		}
	}
	// Deepest first: a read-only directory would refuse its children,
	// and writing a child changes its parent's time.
	slices.Reverse(dirs)
	for _, d := range dirs {
		if err := os.Chmod(d.path, d.mode); err != nil {
			return rep, fmt.Errorf("%w: restore %s: %v", ErrWorkspace, d.path, err)
		}
		if err := os.Chtimes(d.path, d.mtime, d.mtime); err != nil {
			return rep, fmt.Errorf("%w: restore %s: %v", ErrWorkspace, d.path, err)
		}
	}
	return rep, nil
}

// restoreName is a tar entry's name cleaned and relative ("." for the
// root), or why it is refused.
func restoreName(name string) (string, error) {
	switch {
	case name == "":
		return "", errors.New("empty name")
	case strings.IndexByte(name, 0) >= 0:
		return "", errors.New("NUL byte in the name")
	case strings.HasPrefix(name, "/"):
		return "", errors.New("absolute name")
	}
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", errors.New(`a ".." component`)
		}
	}
	return path.Clean(name), nil
}

// realParents checks that every parent of name below dir is a directory,
// not a symbolic link, and that nothing stands at name yet.
func realParents(dir, name string) error {
	p := dir
	parts := strings.Split(name, "/")
	for _, c := range parts[:len(parts)-1] {
		p = filepath.Join(p, c)
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("parent %s: %v", c, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("parent %s is not a directory (a %s)", c, fi.Mode().Type())
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(name))); err == nil {
		return errors.New("an entry of that name is there already")
	}
	return nil
}

// writeRestored creates p exclusively, never through a symlink, with the
// next size bytes of r and mode perm.
func writeRestored(p string, r io.Reader, size int64, perm os.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, r, size); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
