package shape

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/isolate"
)

// Refresh kinds, as a template's spec.refresh lists them.
const (
	RefreshMachineID   = "machine-id"
	RefreshSSHHostKeys = "ssh-host-keys"
	RefreshRandomSeed  = "random-seed"
)

// RefreshKinds are the kinds Refresh knows, in the order it does them.
func RefreshKinds() []string {
	return []string{RefreshMachineID, RefreshSSHHostKeys, RefreshRandomSeed}
}

// keygenTimeout bounds the template's ssh-keygen in the refresh phase.
const keygenTimeout = 2 * time.Minute

// RefreshResult is one per-clone value the refresh phase regenerated (or
// why it did not).
type RefreshResult struct {
	Kind string `json:"kind"` // machine-id, ssh-host-keys, random-seed
	Done bool   `json:"done"`
	// Detail says what was made, or why nothing was.
	Detail string `json:"detail,omitempty"`
}

// Refresh runs the refresh phase for one sandbox of the template unpacked
// at root: per-clone values the template must not carry, made fresh in dir
// (an existing directory of the caller's, outside the sandbox) and returned
// as read-only mounts over the template's files, with a result per kind. A
// fresh machine id is always made; ssh host keys and a random seed when
// kinds asks for them. The mount targets must exist in root (MountPoints).
func Refresh(ctx context.Context, root string, kinds []string, dir string) ([]isolate.Mount, []RefreshResult, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	var mounts []isolate.Mount
	var results []RefreshResult

	id, err := NewMachineID()
	if err != nil {
		return nil, nil, err
	}
	midFile := filepath.Join(dir, MachineIDFile)
	if err := os.WriteFile(midFile, id, 0o444); err != nil {
		return nil, nil, err
	}
	mounts = append(mounts, isolate.Mount{Source: midFile, Target: "/etc/machine-id", ReadOnly: true})
	detail := "/etc/machine-id"
	if regularFile(r, "var/lib/dbus/machine-id") {
		mounts = append(mounts, isolate.Mount{Source: midFile, Target: "/var/lib/dbus/machine-id", ReadOnly: true})
		detail += ", /var/lib/dbus/machine-id"
	}
	results = append(results, RefreshResult{Kind: RefreshMachineID, Done: true, Detail: detail})

	if slices.Contains(kinds, RefreshRandomSeed) {
		res := RefreshResult{Kind: RefreshRandomSeed}
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

	if slices.Contains(kinds, RefreshSSHHostKeys) {
		m, res, err := sshHostKeys(ctx, root, r, dir)
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
func sshHostKeys(ctx context.Context, root string, r *os.Root, dir string) (*isolate.Mount, RefreshResult, error) {
	res := RefreshResult{Kind: RefreshSSHHostKeys}
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
		Root:         root,
		ReadOnlyRoot: true,
		Mounts:       []isolate.Mount{{Source: sshDir, Target: "/etc/ssh"}},
		Env:          isolate.Env{"PATH": DefaultPath},
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

func regularFile(r *os.Root, name string) bool {
	fi, err := r.Lstat(name)
	return err == nil && fi.Mode().IsRegular()
}
