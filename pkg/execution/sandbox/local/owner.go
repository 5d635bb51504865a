package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// ownerAttr is the extended attribute of a sandbox's directory that holds
// its owner once the owner changed after Create. sandbox.json keeps the
// owner Create gave it; the attribute, when present, is the newer word.
//
// An owner swap is on the path of every warm claim, so it must cost little
// when fifty claims arrive at once. Replacing sandbox.json (a temporary
// file written, then renamed over it) costs a new inode, a directory
// update and, on ext4, a write-back the rename starts: 0.3 to 1 ms each on
// this project's CI machines, and those operations queue behind one
// another and behind the journal while other sandboxes are being written.
// One setxattr replaces a few bytes of the directory's inode in a single
// system call, atomically for readers (the kernel swaps the whole value
// under the inode's xattr lock) and for a process killed at any moment,
// and costs far less than replacing a file (no new inode, no rename, no
// directory fsync): benchmark B6's warm claims measure it.
//
// The owner need not survive a host crash: the sandboxes do not either (a
// record from another boot is dead, whoever owned it). It must survive the
// process: setxattr, like a write, is in the kernel once it returns.
const ownerAttr = "user.slipway.owner"

// maxOwner bounds an owner's length in the attribute (and in SetOwner).
const maxOwner = 255

// ownerStore says how this Backend records owner changes: in ownerAttr,
// or, on a file system without user extended attributes (some tmpfs and
// overlay mounts), by replacing sandbox.json as Create writes it.
type ownerStore int

const (
	ownerInAttr ownerStore = iota
	ownerInRecord
)

// probeOwnerStore finds whether dir's file system takes user extended
// attributes: it sets one on dir and removes it.
func probeOwnerStore(dir string) ownerStore {
	const probe = "user.slipway.probe"
	if err := unix.Setxattr(dir, probe, []byte("1"), 0); err != nil {
		return ownerInRecord
	}
	_ = unix.Removexattr(dir, probe)
	return ownerInAttr
}

// writeOwner records rec.Owner, the sandbox's new owner.
func (b *Backend) writeOwner(rec *record) error {
	dir := b.sandboxDir(rec.ID)
	if b.ownerStore == ownerInAttr {
		if err := unix.Setxattr(dir, ownerAttr, []byte(rec.Owner), 0); err != nil {
			return fmt.Errorf("local: record the owner of %s: %w", rec.ID, err)
		}
		return nil
	}
	// The fallback: the record replaced whole by a rename, not flushed to
	// disk (a host crash ends the sandbox; see ownerAttr). An attribute an
	// earlier Backend set would hide the new owner: it goes first.
	if err := unix.Removexattr(dir, ownerAttr); err != nil && !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.ENOTSUP) && !errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("local: record the owner of %s: %w", rec.ID, err)
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".sandbox.json.tmp-*") // mode 0600
	if err != nil {
		return fmt.Errorf("local: record %s: %w", rec.ID, err)
	}
	_, werr := f.Write(append(data, '\n'))
	if err := errors.Join(werr, f.Close()); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("local: record %s: %w", rec.ID, err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, "sandbox.json")); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("local: record %s: %w", rec.ID, err)
	}
	return nil
}

// readOwner sets rec.Owner from ownerAttr when the sandbox's directory has
// it (whichever way this Backend records owners: an earlier Backend on the
// same directory may have used the attribute).
func (b *Backend) readOwner(rec *record) error {
	dir := b.sandboxDir(rec.ID)
	var buf [maxOwner + 1]byte
	n, err := unix.Getxattr(dir, ownerAttr, buf[:])
	switch {
	case err == nil && n > 0 && n <= maxOwner:
		rec.Owner = string(buf[:n])
		return nil
	case err == nil:
		return fmt.Errorf("local: %s: attribute %s holds %d bytes, want 1 to %d", dir, ownerAttr, n, maxOwner)
	case errors.Is(err, unix.ENODATA), errors.Is(err, unix.ENOTSUP), errors.Is(err, unix.EOPNOTSUPP):
		return nil // the owner Create recorded
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w: %s", sandbox.ErrNotFound, rec.ID)
	case errors.Is(err, unix.ERANGE):
		return fmt.Errorf("local: %s: attribute %s is over %d bytes", dir, ownerAttr, maxOwner)
	default:
		return fmt.Errorf("local: %s: %w", dir, err)
	}
}
