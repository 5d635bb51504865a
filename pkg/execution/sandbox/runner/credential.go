package runner

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// CredentialDir is where a sandbox finds the credentials issued to its
// claim (sandbox.CredentialDir is this): `slipway-runner credential put`
// and `credential rm` work in it.
const CredentialDir = "/run/slipway/credentials"

// MaxCredentialSize bounds the data PutCredential takes (a token, not a
// file system).
const MaxCredentialSize = 64 << 10

// ErrCredential: a credential was refused (a name that is not a plain file
// name, data too large, a folder that is not in memory).
var ErrCredential = errors.New("runner: credential")

// CredentialName accepts a plain file name: not empty, no slash or NUL,
// not starting with a dot (the dot names are the temporary files of
// PutCredential), at most 255 bytes.
func CredentialName(name string) error {
	if name == "" || strings.HasPrefix(name, ".") || strings.ContainsAny(name, "/\x00") || len(name) > 255 {
		return fmt.Errorf("%w: name %q is not a plain file name", ErrCredential, name)
	}
	return nil
}

// InMemory checks that dir is a tmpfs: a credential is never written to a
// disk.
func InMemory(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCredential, dir, err)
	}
	if st.Type != unix.TMPFS_MAGIC {
		return fmt.Errorf("%w: %s is not in memory (file system type %#x, want tmpfs)", ErrCredential, dir, st.Type)
	}
	return nil
}

// PutCredential reads r to its end (at most MaxCredentialSize bytes) and
// makes it the file name in dir, mode 0400, owned by the calling user
// (the sandbox's: in a pod, the exec runs as the container's user). The
// data goes to a new temporary file (O_EXCL, O_NOFOLLOW) renamed over
// name, so a reader sees the old file or the new one, never a part. Its
// errors name the file, never the data.
func PutCredential(dir, name string, r io.Reader) error {
	if err := CredentialName(name); err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxCredentialSize+1))
	if err != nil {
		return fmt.Errorf("%w: %s: reading the data: %v", ErrCredential, name, errors.Unwrap(err))
	}
	defer clear(data)
	if len(data) > MaxCredentialSize {
		return fmt.Errorf("%w: %s: more than %d bytes", ErrCredential, name, MaxCredentialSize)
	}
	var suffix [6]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCredential, name, err)
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%x", name, suffix))
	fd, err := unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o400)
	if err != nil {
		return fmt.Errorf("%w: %s in %s: create: %v", ErrCredential, name, dir, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	err = f.Chmod(0o400) // whatever the umask
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		var le *os.LinkError
		if errors.As(err, &le) {
			err = le.Err
		}
		return fmt.Errorf("%w: %s in %s: %v", ErrCredential, name, dir, err)
	}
	return nil
}

// RemoveCredential removes the file name from dir; one that is not there
// is not an error.
func RemoveCredential(dir, name string) error {
	if err := CredentialName(name); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: remove %s in %s: %v", ErrCredential, name, dir, errors.Unwrap(err))
	}
	return nil
}
