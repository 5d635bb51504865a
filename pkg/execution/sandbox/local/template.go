package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/isolate"
	"github.com/slipway-dev/slipway/pkg/isolate/shape"
	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// labelTemplateRefresh is the label package template writes the refresh
// kinds in (a test keeps the two in step; this package sits beside
// template, not above it).
const labelTemplateRefresh = "dev.slipway.template.refresh"

// DefaultWorkdir is the workspace inside a sandbox when the template names
// no working directory (or names /).
const DefaultWorkdir = shape.DefaultWorkdir

// tmpl is an unpacked template: its shared read-only root file system and
// what its image config says about running it.
type tmpl struct {
	digest  v1.Hash
	root    string        // templates/<hex>/rootfs
	workdir string        // inside
	user    *isolate.User // nil: root
	env     []string      // the image's, NAME=value
	refresh []string      // the template's refresh label
}

// keyedMutex serialises work per key (one extraction per template digest,
// one copy per runner digest).
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*sync.Mutex{}
	}
	l := k.locks[key]
	if l == nil {
		l = &sync.Mutex{}
		k.locks[key] = l
	}
	k.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// template returns img unpacked under the state directory, extracting it
// the first time its digest is seen (concurrent callers wait for the one
// extraction) and reusing it afterwards.
func (b *Backend) template(ctx context.Context, img v1.Image, digest v1.Hash) (*tmpl, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("template %s: config: %w", digest, err)
	}
	t := &tmpl{digest: digest, env: cf.Config.Env, workdir: shape.Workdir(cf.Config.WorkingDir)}
	if t.user, err = parseUser(cf.Config.User); err != nil {
		return nil, fmt.Errorf("%w: template %s: user %q: %v", sandbox.ErrInvalidSpec, digest, cf.Config.User, err)
	}
	if r := cf.Config.Labels[labelTemplateRefresh]; r != "" {
		t.refresh = strings.Split(r, ",")
	}
	dir := filepath.Join(b.dir, "templates", digest.Hex)
	t.root = filepath.Join(dir, "rootfs")

	unlock := b.templates.lock(digest.Hex)
	defer unlock()
	if fi, err := os.Stat(t.root); err == nil && fi.IsDir() {
		// Unpacked by an earlier version, perhaps, that made fewer mount
		// points: add the missing ones (never changing what is there).
		if err := prepareMountPoints(t.root, t.workdir); err != nil {
			return nil, fmt.Errorf("template %s: %w", digest, err)
		}
		return t, nil
	}
	if err := mkdirs(dir); err != nil {
		return nil, err
	}
	tmp := filepath.Join(dir, ".extract-"+randomHex(6))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return nil, err
	}
	b.extractions.Add(1)
	if _, err := rootfs.Extract(ctx, img, tmp); err != nil {
		_ = removeAll(tmp)
		return nil, fmt.Errorf("template %s: unpack: %w", digest, err)
	}
	if err := prepareMountPoints(tmp, t.workdir); err != nil {
		_ = removeAll(tmp)
		return nil, fmt.Errorf("template %s: %w", digest, err)
	}
	if err := os.Rename(tmp, t.root); err != nil {
		_ = removeAll(tmp)
		return nil, err
	}
	return t, nil
}

// prepareMountPoints adds to an unpacked template the mount points of
// every sandbox (package shape's, sandbox.CredentialDir, the egress
// proxy's directory and an empty file at RunnerPath), never changing what is there.
func prepareMountPoints(dir, workdir string) error {
	return shape.MountPoints(dir, workdir, []string{sandbox.CredentialDir, egressDir}, []string{sandbox.RunnerPath})
}

// runnerBinary returns the state directory's copy of the runner binary,
// copying it the first time its digest is seen and checking that the copy
// has the digest the Spec promises.
func (b *Backend) runnerBinary(rb sandbox.RunnerBinary) (string, error) {
	hexd, ok := strings.CutPrefix(rb.Digest, "sha256:")
	if !ok || len(hexd) != 64 || strings.Trim(hexd, "0123456789abcdef") != "" {
		return "", fmt.Errorf("%w: Runner.Digest %q is not sha256:<hex>", sandbox.ErrInvalidSpec, rb.Digest)
	}
	dir := filepath.Join(b.dir, "runners", hexd)
	dst := filepath.Join(dir, "slipway-runner")
	unlock := b.runners.lock(hexd)
	defer unlock()
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	if err := mkdirs(dir); err != nil {
		return "", err
	}
	in, err := os.ReadFile(rb.Path)
	if err != nil {
		return "", fmt.Errorf("%w: Runner.Path: %w", sandbox.ErrInvalidSpec, err)
	}
	if got := sha256Hex(in); got != hexd {
		return "", fmt.Errorf("%w: runner %s is sha256:%s, the spec says %s", sandbox.ErrIdentity, rb.Path, got, rb.Digest)
	}
	tmp := filepath.Join(dir, ".copy-"+randomHex(6))
	if err := os.WriteFile(tmp, in, 0o555); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o555); err != nil { // umask
		return "", err
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	return dst, nil
}

// parseUser turns an image config's "uid[:gid]" into a User; names are
// refused (they would need the template's /etc/passwd on the host).
func parseUser(s string) (*isolate.User, error) {
	if s == "" {
		return nil, nil
	}
	u, g, hasGID := strings.Cut(s, ":")
	uid, err := strconv.Atoi(u)
	if err != nil || uid < 0 {
		return nil, fmt.Errorf("want uid[:gid] in numbers")
	}
	gid := uid
	if hasGID {
		if gid, err = strconv.Atoi(g); err != nil || gid < 0 {
			return nil, fmt.Errorf("want uid[:gid] in numbers")
		}
	}
	if uid == 0 && gid == 0 {
		return nil, nil
	}
	return &isolate.User{UID: uid, GID: gid}, nil
}

// mkdirs makes dir and its missing parents with mode 0711 whatever the
// umask: a sandbox of a template with a user runs bwrap as that user, who
// must reach the template's root, the runner and its workspace, but not
// list the state. Parents that exist already are left as they are (see
// CheckTemplate); dir itself is set to 0711.
func mkdirs(dir string) error {
	var missing []string
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil || p == filepath.Dir(p) {
			break
		}
		missing = append(missing, p)
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	for _, p := range missing[min(1, len(missing)):] { // dir itself is set below
		if err := os.Chmod(p, 0o711); err != nil {
			return err
		}
	}
	return os.Chmod(dir, 0o711)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
