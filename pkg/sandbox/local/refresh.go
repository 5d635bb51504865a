package local

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/slipway-dev/slipway/pkg/isolate"
	"github.com/slipway-dev/slipway/pkg/sandbox"
)

// keygenTimeout bounds the template's ssh-keygen in the refresh phase.
const keygenTimeout = 2 * time.Minute

// refresh runs the refresh phase for a new sandbox: per-clone values the
// template must not carry, made fresh in dir (the sandbox's refresh
// directory) and returned as read-only mounts over the template's files,
// with a result per kind. A fresh machine id is always made; ssh host keys
// and a random seed when the template's refresh label asks for them.
func refresh(ctx context.Context, t *tmpl, dir string) ([]isolate.Mount, []sandbox.RefreshResult, error) {
	r, err := os.OpenRoot(t.root)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	var mounts []isolate.Mount
	var results []sandbox.RefreshResult

	// machine-id: 32 lowercase hex digits and a newline (machine-id(5)).
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return nil, nil, err
	}
	midFile := filepath.Join(dir, "machine-id")
	if err := os.WriteFile(midFile, []byte(hex.EncodeToString(id)+"\n"), 0o444); err != nil {
		return nil, nil, err
	}
	mounts = append(mounts, isolate.Mount{Source: midFile, Target: "/etc/machine-id", ReadOnly: true})
	detail := "/etc/machine-id"
	if regularFile(r, "var/lib/dbus/machine-id") {
		mounts = append(mounts, isolate.Mount{Source: midFile, Target: "/var/lib/dbus/machine-id", ReadOnly: true})
		detail += ", /var/lib/dbus/machine-id"
	}
	results = append(results, sandbox.RefreshResult{Kind: refreshMachineID, Done: true, Detail: detail})

	if slices.Contains(t.refresh, refreshRandomSeed) {
		res := sandbox.RefreshResult{Kind: refreshRandomSeed}
		const seedPath = "var/lib/systemd/random-seed"
		if regularFile(r, seedPath) {
			seed := make([]byte, 512)
			if _, err := rand.Read(seed); err != nil {
				return nil, nil, err
			}
			f := filepath.Join(dir, "random-seed")
			if err := os.WriteFile(f, seed, 0o400); err != nil {
				return nil, nil, err
			}
			mounts = append(mounts, isolate.Mount{Source: f, Target: "/" + seedPath, ReadOnly: true})
			res.Done, res.Detail = true, "/"+seedPath
		} else {
			res.Detail = "the template has no /" + seedPath + " (scrubbed): nothing to refresh"
		}
		results = append(results, res)
	}

	if slices.Contains(t.refresh, refreshSSHHostKeys) {
		m, res, err := sshHostKeys(ctx, t, r, dir)
		if err != nil {
			return nil, nil, err
		}
		if m != nil {
			mounts = append(mounts, *m)
		}
		results = append(results, res)
	}
	return mounts, results, nil
}

// sshHostKeys makes new host keys with the template's own ssh-keygen -A,
// run under bubblewrap on the template's root with a private copy of
// /etc/ssh, which is then mounted read-only over /etc/ssh. A template
// without ssh-keygen or /etc/ssh is skipped, with the reason.
func sshHostKeys(ctx context.Context, t *tmpl, r *os.Root, dir string) (*isolate.Mount, sandbox.RefreshResult, error) {
	res := sandbox.RefreshResult{Kind: refreshSSHHostKeys}
	if fi, err := r.Stat("etc/ssh"); err != nil || !fi.IsDir() {
		res.Detail = "the template has no /etc/ssh: skipped"
		return nil, res, nil
	}
	keygen := ""
	for _, p := range []string{"usr/bin/ssh-keygen", "bin/ssh-keygen", "usr/local/bin/ssh-keygen"} {
		if fi, err := r.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			keygen = "/" + p
			break
		}
	}
	if keygen == "" {
		res.Detail = "the template has no ssh-keygen: skipped"
		return nil, res, nil
	}
	sshDir := filepath.Join(dir, "ssh")
	sub, err := r.OpenRoot("etc/ssh")
	if err != nil {
		return nil, res, err
	}
	defer sub.Close()
	if err := os.Mkdir(sshDir, 0o700); err != nil {
		return nil, res, err
	}
	if err := copyTree(sub, sshDir); err != nil {
		return nil, res, fmt.Errorf("copy the template's /etc/ssh: %w", err)
	}
	out, err := isolate.Run(ctx, isolate.Spec{
		Root:         t.root,
		ReadOnlyRoot: true,
		Mounts:       []isolate.Mount{{Source: sshDir, Target: "/etc/ssh"}},
		Env:          isolate.Env{"PATH": defaultPath},
		Argv:         []string{keygen, "-A"},
		Timeout:      keygenTimeout,
		MaxOutput:    16 << 10,
	})
	if err != nil {
		return nil, res, fmt.Errorf("refresh ssh host keys: %w", err)
	}
	if out.ExitCode != 0 || out.TimedOut {
		return nil, res, fmt.Errorf("refresh ssh host keys: %s -A: exit %d: %s", keygen, out.ExitCode, strings.TrimSpace(string(out.Output)))
	}
	keys, _ := filepath.Glob(filepath.Join(sshDir, "ssh_host_*_key.pub"))
	var names []string
	for _, k := range keys {
		b, err := os.ReadFile(k)
		if err != nil {
			return nil, res, err
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			return nil, res, fmt.Errorf("refresh ssh host keys: %s is not a public key", filepath.Base(k))
		}
		blob, err := base64.StdEncoding.DecodeString(f[1])
		if err != nil {
			return nil, res, fmt.Errorf("refresh ssh host keys: %s: %w", filepath.Base(k), err)
		}
		sum := sha256.Sum256(blob)
		names = append(names, f[0]+" SHA256:"+base64.RawStdEncoding.EncodeToString(sum[:]))
	}
	if len(names) == 0 {
		return nil, res, fmt.Errorf("refresh ssh host keys: %s -A made no keys", keygen)
	}
	res.Done, res.Detail = true, strings.Join(names, ", ")
	return &isolate.Mount{Source: sshDir, Target: "/etc/ssh", ReadOnly: true}, res, nil
}

// seedWorkspace copies the template's working directory (its contents,
// with their modes and owners) into the sandbox's private workspace ws,
// which exists and is empty. The workspace itself belongs to the sandbox's
// user, with owner write permission, whoever owned the template's directory:
// it is the one place the sandbox may write.
func seedWorkspace(t *tmpl, ws string) error {
	r, err := os.OpenRoot(t.root)
	if err != nil {
		return err
	}
	defer r.Close()
	rel := strings.TrimPrefix(t.workdir, "/")
	sub, err := r.OpenRoot(rel)
	if err != nil {
		return fmt.Errorf("template workdir %s: %w", t.workdir, err)
	}
	defer sub.Close()
	if err := copyTree(sub, ws); err != nil {
		return fmt.Errorf("seed the workspace from the template's %s: %w", t.workdir, err)
	}
	fi, err := os.Stat(ws)
	if err != nil {
		return err
	}
	if err := os.Chmod(ws, fi.Mode().Perm()|0o700); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return nil // everything is the caller's, which the sandbox runs as
	}
	uid, gid := 0, 0
	if t.user != nil {
		uid, gid = t.user.UID, t.user.GID
	}
	return os.Chown(ws, uid, gid)
}

// copyTree copies the tree under src into dst (an existing directory,
// which takes src's mode and owner): directories, regular files, symlinks
// (as links, never followed) and named pipes, with modes, modification
// times and, when running as root, owners. Other entries are skipped.
func copyTree(src *os.Root, dst string) error {
	root := os.Geteuid() == 0
	type dirTime struct {
		path string
		mt   time.Time
	}
	var dirs []dirTime
	err := fs.WalkDir(src.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := src.Lstat(p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, filepath.FromSlash(p))
		mode := fi.Mode()
		switch {
		case mode.IsDir():
			if p != "." {
				if err := os.Mkdir(target, 0o700); err != nil {
					return err
				}
			}
			dirs = append(dirs, dirTime{target, fi.ModTime()})
		case mode.IsRegular():
			if err := copyFileFrom(src, p, target); err != nil {
				return err
			}
		case mode&fs.ModeSymlink != 0:
			link, err := src.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
		case mode&fs.ModeNamedPipe != 0:
			if err := syscall.Mkfifo(target, 0o600); err != nil {
				return err
			}
		default:
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && root {
			if err := os.Lchown(target, int(st.Uid), int(st.Gid)); err != nil {
				return err
			}
		}
		if mode&fs.ModeSymlink == 0 {
			if err := os.Chmod(target, mode.Perm()|mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
				return err
			}
			if !mode.IsDir() {
				return os.Chtimes(target, time.Time{}, fi.ModTime())
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, d := range slices.Backward(dirs) { // children first: writing into a directory changes its time
		if err := os.Chtimes(d.path, time.Time{}, d.mt); err != nil {
			return err
		}
	}
	return nil
}

func copyFileFrom(src *os.Root, name, dst string) error {
	in, err := src.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

func regularFile(r *os.Root, name string) bool {
	fi, err := r.Lstat(name)
	return err == nil && fi.Mode().IsRegular()
}
