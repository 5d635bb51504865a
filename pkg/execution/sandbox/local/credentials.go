package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

var _ sandbox.Credentials = (*Backend)(nil)

// PutCredential writes data as name in the sandbox's credential tmpfs
// (sandbox.CredentialDir, mounted by bubblewrap when the sandbox started).
// The host reaches that tmpfs through /proc/<pid>/root of the sandbox's
// pid 1, resolving the path inside the sandbox's root (openat2
// RESOLVE_IN_ROOT: no symlink leads out of it), checks that it is a tmpfs,
// writes a temporary file (O_EXCL, O_NOFOLLOW), gives it mode 0400 and the
// owner the sandbox's processes run as, and renames it into place. data
// appears in no error.
func (b *Backend) PutCredential(ctx context.Context, id, name string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := credentialName(name); err != nil {
		return err
	}
	rec, err := b.runningRecord(id)
	if err != nil {
		return err
	}
	dir, err := openCredentialDir(rec)
	if err != nil {
		return fmt.Errorf("local: credential %s of sandbox %s: %w", name, id, err)
	}
	defer unix.Close(dir)
	uid, gid, err := processOwner(rec.Init.Pid)
	if err != nil {
		return fmt.Errorf("local: credential %s of sandbox %s: the sandbox's user: %w", name, id, err)
	}
	// The file is made as the sandbox's user: its owner then is that user,
	// and a tmpfs of a user namespace takes no file of an owner it does not
	// map (the host's root, for one).
	tmp := "." + name + "." + randomHex(6)
	err = asFSUser(uid, gid, func() error {
		if err := writeAt(dir, tmp, data); err != nil {
			_ = unix.Unlinkat(dir, tmp, 0)
			return err
		}
		if err := unix.Renameat(dir, tmp, dir, name); err != nil {
			_ = unix.Unlinkat(dir, tmp, 0)
			return fmt.Errorf("rename: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("local: credential %s of sandbox %s: %w", name, id, err)
	}
	return nil
}

// asFSUser runs f with the file system uid and gid of this thread set to
// uid and gid (f must stay on the calling goroutine), and sets them back.
// When they cannot be set back, the thread stays locked to the goroutine
// and ends with it.
func asFSUser(uid, gid int, f func() error) error {
	euid, egid := os.Geteuid(), os.Getegid()
	if uid == euid && gid == egid {
		return f()
	}
	goruntime.LockOSThread()
	restore := func() bool {
		_ = unix.Setfsuid(euid)
		_ = unix.Setfsgid(egid)
		u, _ := unix.SetfsuidRetUid(-1)
		g, _ := unix.SetfsgidRetGid(-1)
		return u == euid && g == egid
	}
	_ = unix.Setfsgid(gid)
	_ = unix.Setfsuid(uid)
	u, _ := unix.SetfsuidRetUid(-1)
	g, _ := unix.SetfsgidRetGid(-1)
	var err error
	if u != uid || g != gid {
		err = fmt.Errorf("cannot act as the sandbox's user %d:%d (file system ids are %d:%d)", uid, gid, u, g)
	} else {
		err = f()
	}
	if restore() {
		goruntime.UnlockOSThread()
	}
	return err
}

// RemoveCredential removes name from the sandbox's credential tmpfs. A
// dead or deleted sandbox has no tmpfs left: nothing to do.
func (b *Backend) RemoveCredential(ctx context.Context, id, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := credentialName(name); err != nil {
		return err
	}
	rec, err := b.runningRecord(id)
	if errors.Is(err, sandbox.ErrNotFound) || errors.Is(err, sandbox.ErrNotRunning) {
		return nil
	}
	if err != nil {
		return err
	}
	dir, err := openCredentialDir(rec)
	if err != nil {
		if !rec.Init.alive() {
			return nil // it died meanwhile, and its tmpfs with it
		}
		return fmt.Errorf("local: credential %s of sandbox %s: %w", name, id, err)
	}
	defer unix.Close(dir)
	if err := unix.Unlinkat(dir, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("local: remove credential %s of sandbox %s: %w", name, id, err)
	}
	return nil
}

// credentialName accepts a plain file name; names starting with a dot are
// kept for the temporary files of PutCredential.
func credentialName(name string) error {
	if name == "" || strings.HasPrefix(name, ".") || strings.ContainsAny(name, "/\x00") || len(name) > 255 {
		return fmt.Errorf("%w: credential name %q is not a plain file name", sandbox.ErrInvalidSpec, name)
	}
	return nil
}

// runningRecord is the record of a sandbox whose processes run now.
func (b *Backend) runningRecord(id string) (*record, error) {
	if err := b.open(); err != nil {
		return nil, err
	}
	if !validID(id) {
		return nil, fmt.Errorf("%w: %q", sandbox.ErrNotFound, id)
	}
	b.mu.Lock()
	rec, err := b.readRecord(id)
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !b.alive(rec) || !rec.Init.alive() {
		return nil, fmt.Errorf("%w: sandbox %s is dead", sandbox.ErrNotRunning, id)
	}
	return rec, nil
}

// openCredentialDir opens sandbox.CredentialDir as the sandbox's pid 1 sees
// it, and checks that it is a tmpfs.
func openCredentialDir(rec *record) (int, error) {
	return openTmpfsInSandbox(rec, sandbox.CredentialDir)
}

// openTmpfsInSandbox opens the directory dir (absolute) as the sandbox's
// pid 1 sees it, resolved inside the sandbox's root (openat2
// RESOLVE_IN_ROOT: no symlink leads out of it), and checks that it is a
// tmpfs.
func openTmpfsInSandbox(rec *record, dir string) (int, error) {
	root, err := unix.Open("/proc/"+strconv.Itoa(rec.Init.Pid)+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the sandbox's root: %w", err)
	}
	defer unix.Close(root)
	// The pid may have been reused between reading the record and the
	// open: the start time says whether root is the sandbox's.
	if !rec.Init.alive() {
		return -1, fmt.Errorf("%w: sandbox %s is dead", sandbox.ErrNotRunning, rec.ID)
	}
	fd, err := unix.Openat2(root, strings.TrimPrefix(dir, "/"), &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return -1, fmt.Errorf("open %s in the sandbox: %w", dir, err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("statfs %s in the sandbox: %w", dir, err)
	}
	if st.Type != unix.TMPFS_MAGIC {
		unix.Close(fd)
		return -1, fmt.Errorf("%s in the sandbox is not a tmpfs (file system type %#x)", dir, st.Type)
	}
	return fd, nil
}

// writeAt creates name in dir (it must not exist) holding data, mode 0400.
func writeAt(dir int, name string, data []byte) error {
	fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o400)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := f.Chmod(0o400); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write: %w", errors.Unwrap(err)) // the error names no data, only the file
	}
	return f.Close()
}

// processOwner is the real uid and gid of pid as the host sees them.
func processOwner(pid int) (int, int, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	uid, gid := -1, -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "Uid" && k != "Gid") {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.Atoi(fields[0])
		if err != nil {
			continue
		}
		if k == "Uid" {
			uid = n
		} else {
			gid = n
		}
	}
	if uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("no Uid or Gid in /proc/%d/status", pid)
	}
	return uid, gid, nil
}
