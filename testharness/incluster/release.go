package incluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/release/selfrelease"
)

// ReleaseKind is the folder of the user's cache (under slipway/) where
// the snapshot release of a clean tree is kept by commit; package deploy's
// tests and make demo-kube share it, so CI builds it once.
const ReleaseKind = "incluster-release"

// Release is a snapshot release's folder and how it came to be: built,
// reused from the cache, or built for one run (the tree being dirty).
type Release struct {
	Dir, How string
}

// SnapshotRelease is a snapshot release of the tree at src for the host's
// platform (slipway release --snapshot). A clean tree's is kept in the
// user's cache folder (ReleaseKind), by commit, and reused: two releases
// of one commit are identical and the build takes minutes on a shared
// machine. A dirty tree's is built into scratch/release, for this run only.
func SnapshotRelease(ctx context.Context, src, scratch string) (Release, error) {
	commit, err := exec.CommandContext(ctx, "git", "-C", src, "rev-parse", "HEAD").Output()
	if err != nil {
		return Release{}, fmt.Errorf("git rev-parse HEAD in %s: %w", src, err)
	}
	status, err := exec.CommandContext(ctx, "git", "-C", src, "status", "--porcelain").Output()
	if err != nil {
		return Release{}, fmt.Errorf("git status in %s: %w", src, err)
	}
	if len(status) > 0 {
		out := filepath.Join(scratch, "release")
		if err := BuildRelease(ctx, src, scratch, out); err != nil {
			return Release{}, err
		}
		return Release{Dir: out, How: "built, the tree being dirty"}, nil
	}
	return KeptRelease(ReleaseKind, strings.TrimSpace(string(commit)), func(out string) error {
		return BuildRelease(ctx, src, scratch, out)
	})
}

// BuildRelease builds src's slipway (go build ./cmd/slipway, in src, into
// scratch) and has it write its snapshot release for the host's platform
// to out.
func BuildRelease(ctx context.Context, src, scratch, out string) error {
	bin := filepath.Join(scratch, "slipway-for-release")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/slipway")
	build.Dir = src
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/slipway in %s: %w\n%s", src, err, b)
	}
	defer os.Remove(bin)
	cmd := exec.CommandContext(ctx, bin, "release", "--snapshot", "--platform", "linux/"+runtime.GOARCH, "--out", out)
	cmd.Dir = src
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("slipway release --snapshot in %s: %w\n%s", src, err, b)
	}
	return nil
}

// KeptRelease is commit's release for the host's platform in folder kind
// of the user's cache (slipway/<kind>/<commit>-linux-<arch>): reused when
// there, else made by build (into a temporary folder beside it, renamed
// when whole) and kept beside the folder's two newest other releases (the
// rest are removed). The folder is locked meanwhile (a lock file), so
// tests and demos running at once build a commit's release once and never
// remove one another is using.
func KeptRelease(kind, commit string, build func(out string) error) (Release, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return Release{}, fmt.Errorf("the user's cache folder: %w", err)
	}
	cache = filepath.Join(cache, "slipway", kind)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return Release{}, err
	}
	lock, err := os.OpenFile(filepath.Join(cache, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return Release{}, err
	}
	defer lock.Close() // and unlocked
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return Release{}, fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	dir := filepath.Join(cache, commit+"-linux-"+runtime.GOARCH)
	if _, err := os.Stat(filepath.Join(dir, "checksums.txt")); err == nil {
		return Release{Dir: dir, How: "reused from " + dir}, nil
	}
	tmp, err := os.MkdirTemp(cache, ".build-")
	if err != nil {
		return Release{}, err
	}
	defer os.RemoveAll(tmp)
	if err := build(filepath.Join(tmp, "out")); err != nil {
		return Release{}, err
	}
	old, _ := filepath.Glob(filepath.Join(cache, "*-linux-*"))
	sort.Slice(old, func(i, j int) bool { return modTime(old[i]).After(modTime(old[j])) })
	for i, o := range old { // the two newest other releases are kept
		if i >= 2 {
			os.RemoveAll(o)
		}
	}
	if err := os.Rename(filepath.Join(tmp, "out"), dir); err != nil {
		return Release{}, fmt.Errorf("keep the release of %s: %w", commit, err)
	}
	return Release{Dir: dir, How: "built and kept in " + dir}, nil
}

// modTime is file's modification time (zero when it cannot be read).
func modTime(file string) time.Time {
	fi, err := os.Stat(file)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// byDigest is a reference by digest.
var byDigest = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)

// ErrNotByDigest is Publish's error when the registry answered a
// program's push with a reference that names no digest.
var ErrNotByDigest = errors.New("not by digest")

// Publish pushes the release in dir to repository (host[/path]), signed by
// sv, with its provenance and SBOM statements, and returns each program's
// image by digest as the registry holds it; it fails unless slipway and
// slipway-runner are among them.
func Publish(ctx context.Context, dir, repository string, sv signature.SignerVerifier) (map[string]string, error) {
	res, err := selfrelease.Publish(ctx, dir, selfrelease.PublishOptions{Repository: repository, Signer: sv})
	if err != nil {
		return nil, fmt.Errorf("publish the release in %s to %s: %w", dir, repository, err)
	}
	out := map[string]string{}
	for _, im := range res.Images {
		if !byDigest.MatchString(im.Ref) {
			return nil, fmt.Errorf("release image %s pushed as %q: %w", im.Program, im.Ref, ErrNotByDigest)
		}
		out[im.Program] = im.Ref
	}
	for _, p := range []string{"slipway", "slipway-runner"} {
		if out[p] == "" {
			return nil, fmt.Errorf("the release in %s pushed no %s image (it pushed %v)", dir, p, out)
		}
	}
	return out, nil
}

// Sums are the sha256 sums (hex) of the release's files in dir, by name,
// from its checksums.txt.
func Sums(dir string) (map[string]string, error) {
	f, err := os.Open(filepath.Join(dir, "checksums.txt"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 {
			out[strings.TrimPrefix(f[1], "*")] = f[0]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "checksums.txt"), err)
	}
	return out, nil
}
