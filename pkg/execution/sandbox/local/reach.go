package local

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/isolate"
)

// ErrUnreachable: the uid a template's sandboxes run as cannot enter a
// directory on the way to the state directory (bwrap would fail with
// "Can't find source path ... Permission denied"). It wraps
// sandbox.ErrUnavailable.
var ErrUnreachable = fmt.Errorf("%w: the state directory is out of reach of the template's user", sandbox.ErrUnavailable)

// CheckTemplate reports whether sandboxes of img can be created on this
// Backend as far as the file system goes: when the host runs as root and
// the template names a user (its image config's User), bwrap runs as that
// uid, which must be able to search every directory from / down to the
// state directory (everything below it is the Backend's, mode 0711). The
// error wraps ErrUnreachable and names the directory, its mode and owner,
// and what to do. Create makes the same check before it starts bwrap.
func (b *Backend) CheckTemplate(img v1.Image) error {
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("local: template config: %w", err)
	}
	u, err := parseUser(cf.Config.User)
	if err != nil {
		return fmt.Errorf("%w: template user %q: %v", sandbox.ErrInvalidSpec, cf.Config.User, err)
	}
	return b.checkReach(u)
}

// checkReach is CheckTemplate for a parsed template user (nil: root).
func (b *Backend) checkReach(u *isolate.User) error {
	if u == nil || os.Geteuid() != 0 {
		// Root needs no search permission; a caller that is not root runs
		// bwrap as itself, and it reached the state directory to open it.
		return nil
	}
	return reachable(b.dir, *u)
}

// reachable checks that u (with no supplementary groups, as
// isolate.Spec.HostUser runs) may search dir and every directory above
// it, by their mode bits (ACLs are not read; a denial they cause still
// shows in Create's error as bwrap's message).
func reachable(dir string, u isolate.User) error {
	var chain []string
	for p := dir; ; p = filepath.Dir(p) {
		chain = append(chain, p)
		if p == filepath.Dir(p) {
			break
		}
	}
	for i := len(chain) - 1; i >= 0; i-- { // from / down
		p := chain[i]
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("local: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		need, who, bit := fs.FileMode(0o001), "others", "o+x"
		switch {
		case int(st.Uid) == u.UID:
			need, who, bit = 0o100, "the owner", "u+x"
		case int(st.Gid) == u.GID:
			need, who, bit = 0o010, "the group", "g+x"
		}
		if fi.Mode().Perm()&need == 0 {
			what := "a parent of the state directory " + dir
			if p == dir {
				what = "the state directory"
			}
			return fmt.Errorf("%w: %s is mode %04o (owner %d:%d), %s, and uid %d (gid %d), whom sandboxes of this template run as, "+
				"may not search it (the x bit for %s is off), so bwrap would fail with \"Can't find source path ... Permission denied\"; "+
				"let it in (chmod %s %s) or choose a state directory whose every parent others may enter (the runtime creates its own directories 0711)",
				ErrUnreachable, p, fi.Mode().Perm(), st.Uid, st.Gid, what, u.UID, u.GID, who, bit, p)
		}
	}
	return nil
}
