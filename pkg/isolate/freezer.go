package isolate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Freezer stops and resumes a sandbox's processes at once with the cgroup
// v1 freezer, for a consistent copy of what they write (a checkpoint). It
// keeps one freezer cgroup per sandbox in a directory named by
// DetectFreezer under this process's own freezer cgroup; the sandbox's
// processes move into it when first frozen and stay there (its children
// are born in it). A host with no writable v1 freezer hierarchy has none:
// Freeze says why. (The cgroup v2 equivalent, cgroup.freeze, is not used
// yet: this host is v1.)
type Freezer struct {
	dir    string // parent of the per-sandbox cgroups; "" when unavailable
	reason string
}

// ErrFreeze wraps failures to freeze or thaw.
var ErrFreeze = errors.New("isolate: freezer")

// DetectFreezer makes the directory name (one path element) for
// sandboxes' freezer cgroups under this process's own v1 freezer cgroup.
// It never fails: a Freezer without a hierarchy refuses to Freeze, saying
// why.
func DetectFreezer(name string) *Freezer {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return &Freezer{reason: fmt.Sprintf("bad cgroup name %q", name)}
	}
	own, err := ownCgroups()
	if err != nil {
		return &Freezer{reason: err.Error()}
	}
	mounts, err := freezerMount()
	if err != nil {
		return &Freezer{reason: err.Error()}
	}
	p, ok := own["freezer"]
	if !ok {
		return &Freezer{reason: "this process is in no freezer cgroup"}
	}
	rel, err := filepath.Rel(mounts.root, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return &Freezer{reason: fmt.Sprintf("own freezer cgroup %s is outside the mounted %s", p, mounts.root)}
	}
	dir := filepath.Join(mounts.point, rel, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return &Freezer{reason: fmt.Sprintf("make %s: %v", dir, err)}
	}
	return &Freezer{dir: dir}
}

func freezerMount() (cgroupMount, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return cgroupMount{}, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || g[0] != "cgroup" {
			continue
		}
		if slices.Contains(strings.Split(g[2], ","), "freezer") {
			return cgroupMount{point: unescapeMount(f[4]), root: unescapeMount(f[3])}, nil
		}
	}
	return cgroupMount{}, errors.New("no cgroup v1 freezer hierarchy mounted")
}

// Available is nil when Freeze can work, else why not.
func (f *Freezer) Available() error {
	if f.dir == "" {
		return fmt.Errorf("%w: unavailable: %s", ErrFreeze, f.reason)
	}
	return nil
}

func (f *Freezer) cgroup(id string) (string, error) {
	if err := f.Available(); err != nil {
		return "", err
	}
	if id == "" || strings.ContainsAny(id, "/\x00") || id == "." || id == ".." {
		return "", fmt.Errorf("%w: bad cgroup name %q", ErrFreeze, id)
	}
	return filepath.Join(f.dir, id), nil
}

// freezeRounds bounds how often Freeze looks again for processes that
// started outside the cgroup while it moved the others in.
const freezeRounds = 20

// Freeze moves every process procs lists (the sandbox's, as host pids)
// into the sandbox id's freezer cgroup and freezes it, and returns once
// the kernel says FROZEN and procs lists no process outside it. thaw
// resumes them. A freeze that does not complete within ctx is undone.
func (f *Freezer) Freeze(ctx context.Context, id string, procs func() ([]int, error)) (thaw func() error, err error) {
	dir, err := f.cgroup(id)
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("%w: %v", ErrFreeze, err)
	}
	thaw = func() error { return f.Thaw(id) }
	fail := func(err error) (func() error, error) {
		_ = thaw()
		return nil, err
	}
	for round := 0; ; round++ {
		pids, err := procs()
		if err != nil {
			return fail(fmt.Errorf("%w: list processes of %s: %v", ErrFreeze, id, err))
		}
		in, err := readPids(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return fail(err)
		}
		var out []int
		for _, p := range pids {
			if !slices.Contains(in, p) {
				out = append(out, p)
			}
		}
		if len(out) == 0 && round > 0 {
			return thaw, nil
		}
		if round >= freezeRounds {
			return fail(fmt.Errorf("%w: processes of %s keep starting outside its freezer cgroup (%d after %d rounds)", ErrFreeze, id, len(out), round))
		}
		for _, p := range out {
			// A process that exited meanwhile is no error.
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(p)), 0); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fail(fmt.Errorf("%w: move pid %d of %s: %v", ErrFreeze, p, id, err))
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("FROZEN"), 0); err != nil {
			return fail(fmt.Errorf("%w: freeze %s: %v", ErrFreeze, id, err))
		}
		if err := waitState(ctx, dir, "FROZEN"); err != nil {
			return fail(fmt.Errorf("%w: freeze %s: %v", ErrFreeze, id, err))
		}
	}
}

// State reads the freezer state of sandbox id's cgroup: "FROZEN",
// "FREEZING", "THAWED", or "" when it has none.
func (f *Freezer) State(id string) (string, error) {
	dir, err := f.cgroup(id)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrFreeze, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Thaw resumes sandbox id's processes; a sandbox with no freezer cgroup is
// left as it is.
func (f *Freezer) Thaw(id string) error {
	dir, err := f.cgroup(id)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("%w: thaw %s: %v", ErrFreeze, id, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := waitState(ctx, dir, "THAWED"); err != nil {
		return fmt.Errorf("%w: thaw %s: %v", ErrFreeze, id, err)
	}
	return nil
}

// Remove thaws sandbox id's freezer cgroup and removes it once its
// processes are gone (the caller kills them); one that is gone is fine.
func (f *Freezer) Remove(id string) error {
	if f.dir == "" {
		return nil
	}
	dir, err := f.cgroup(id)
	if err != nil {
		return err
	}
	if err := f.Thaw(id); err != nil {
		return err
	}
	for range 200 {
		err = syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		sleepBrief()
	}
	return fmt.Errorf("%w: remove %s: %v", ErrFreeze, dir, err)
}

func waitState(ctx context.Context, dir, want string) error {
	for {
		b, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(b)) == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("state %s, not %s: %w", strings.TrimSpace(string(b)), want, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

func readPids(path string) ([]int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFreeze, err)
	}
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if p, err := strconv.Atoi(f); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}
