package runner

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// ListenerFromFD takes over a listening socket passed to the runner as
// file descriptor fd (the sandbox backend passes it as standard input) and
// puts /dev/null in its place, so that no command the runner starts can
// inherit the socket.
func ListenerFromFD(fd int) (net.Listener, error) {
	f := os.NewFile(uintptr(fd), "listener")
	if f == nil {
		return nil, fmt.Errorf("runner: fd %d is not open", fd)
	}
	ln, err := net.FileListener(f) // a close-on-exec duplicate
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("runner: fd %d is not a listening socket: %w", fd, err)
	}
	null, err := unix.Open("/dev/null", unix.O_RDWR, 0)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("runner: open /dev/null: %w", err)
	}
	if null != fd {
		err = unix.Dup3(null, fd, 0)
		unix.Close(null)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("runner: put /dev/null at fd %d: %w", fd, err)
		}
	}
	return ln, nil
}

// Harden makes the runner process non-dumpable: a command of the same uid
// without CAP_SYS_PTRACE can then neither trace it nor read its memory, its
// environment or its file descriptors (the listening socket among them)
// through /proc or pidfd_getfd. Commands the runner starts are dumpable
// again (execve resets it).
func Harden() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("runner: prctl(PR_SET_DUMPABLE): %w", err)
	}
	return nil
}

// ListenUnix listens on a unix socket at path, replacing a socket an
// earlier runner left there (a restarted container), and makes it
// reachable by its owner only (mode 0600).
func ListenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() == os.ModeSocket {
		_ = os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("runner: listen: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("runner: listen: %w", err)
	}
	return ln, nil
}
