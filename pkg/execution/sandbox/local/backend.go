package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/slipway-dev/slipway/internal/atomicfile"
	"github.com/slipway-dev/slipway/pkg/execution/egress"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/isolate"
)

// Named defaults.
const (
	// DefaultReadyTimeout bounds how long Create waits for the runner to
	// prove its identity.
	DefaultReadyTimeout = 30 * time.Second
	// killLimit bounds how long Delete waits for a killed sandbox to be gone.
	killLimit = 10 * time.Second
	// logTail is how much of the runner's own stderr is kept for errors.
	logTail = 8 << 10
)

// ErrStateInUse: another Backend (in this or another process) holds the
// state directory.
var ErrStateInUse = errors.New("local: state directory in use")

// Backend runs sandboxes on this host under bubblewrap, keeping their
// durable state in one directory. Its methods are safe for concurrent use.
type Backend struct {
	dir    string
	lock   *os.File // flock held for the Backend's life
	boot   string
	o      options
	closed atomic.Bool

	templates, runners keyedMutex
	extractions        atomic.Int64 // template extractions, for tests
	recordWrites       atomic.Int64 // durable writes of sandbox.json, for tests
	exeDigests         sync.Map     // version of an executable -> its digest (exeDigest)

	mu       sync.Mutex
	procs    map[string]*isolate.Process // sandboxes this Backend started and has not deleted
	creating map[string]bool             // ids whose Create has not returned
	egress   map[string]*egressProxy     // allow-list sandboxes' proxies (egress.go)

	owners     idLocks    // one owner change (or removal) per sandbox at a time
	ownerStore ownerStore // how owner changes are recorded (owner.go)

	cgroups        *isolate.Cgroups  // where sandboxes' cgroups go (bounds.go)
	sizedWorkspace bool              // workspaces can be sized tmpfs mounts
	provedCgroup   []string          // controllers a probe cgroup proved at start (bounds.go)
	cgroupWhy      map[string]string // why a controller the host has did not prove itself
	noFileMax      uint64            // the most open files a runner can lower itself to; 0: unproved
	noFileWhy      string            // why openFiles is not enforced

	freezerOnce sync.Once
	freezer     *isolate.Freezer // the cgroup v1 freezer (checkpoint.go), made on first use
}

// idLocks serialises work per sandbox id without a lock across all of
// them: an id's entry lives while someone holds or waits for it.
type idLocks struct {
	mu sync.Mutex
	m  map[string]*idLock
}

type idLock struct {
	sync.Mutex
	n int
}

func (l *idLocks) lock(id string) (unlock func()) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*idLock{}
	}
	e := l.m[id]
	if e == nil {
		e = &idLock{}
		l.m[id] = e
	}
	e.n++
	l.mu.Unlock()
	e.Lock()
	return func() {
		e.Unlock()
		l.mu.Lock()
		if e.n--; e.n == 0 {
			delete(l.m, id)
		}
		l.mu.Unlock()
	}
}

var _ sandbox.Backend = (*Backend)(nil)

// Option configures New.
type Option func(*options) error

type options struct {
	readyTimeout  time.Duration
	ownerInRecord bool // tests: record owners as a file system without xattrs must
	noCgroups     bool // WithoutCgroups
	egressRecord  func(sandboxID string, a egress.Attempt)
	noSeccomp     bool // WithUnsafeNoSeccomp
	egressDNS     egress.Resolver
}

// WithUnsafeNoSeccomp starts sandboxes without their seccomp filter and
// lets them make user namespaces (isolate.Spec.UnsafeNoSeccomp): for
// measuring what the protections cost (benchmark B11) and for debugging.
// A workload can then use the kernel keyring, make user namespaces and
// call what Docker's default profile refuses. Never for workloads.
func WithUnsafeNoSeccomp() Option {
	return func(o *options) error {
		o.noSeccomp = true
		return nil
	}
}

// WithReadyTimeout bounds how long Create waits for a new sandbox's runner
// to prove its identity (DefaultReadyTimeout).
func WithReadyTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("local: ready timeout %s must be positive", d)
		}
		o.readyTimeout = d
		return nil
	}
}

// New opens (creating it if needed) the state directory dir and takes it
// for this Backend; ErrStateInUse if another Backend holds it. Sandboxes a
// previous Backend left in dir are found by List: running ones can be used
// and deleted, dead ones deleted (see sandbox.Reap). Deletions a crash
// interrupted and half-done template extractions are finished or removed
// here.
func New(dir string, opts ...Option) (*Backend, error) {
	o := options{readyTimeout: DefaultReadyTimeout}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("local: state directory %q is not absolute", dir)
	}
	for _, d := range []string{dir, filepath.Join(dir, "sandboxes"), filepath.Join(dir, "templates"), filepath.Join(dir, "runners")} {
		if err := mkdirs(d); err != nil {
			return nil, fmt.Errorf("local: %w", err)
		}
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrStateInUse, dir)
		}
		return nil, fmt.Errorf("local: lock %s: %w", dir, err)
	}
	boot, err := bootID()
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("local: %w", err)
	}
	b := &Backend{dir: dir, lock: lock, boot: boot, o: o, procs: map[string]*isolate.Process{}, creating: map[string]bool{}, egress: map[string]*egressProxy{}}
	b.ownerStore = probeOwnerStore(filepath.Join(dir, "sandboxes"))
	if o.ownerInRecord {
		b.ownerStore = ownerInRecord
	}
	b.detectBounds()
	b.finishInterrupted()
	return b, nil
}

// finishInterrupted removes what a crash left half done: sandbox
// directories whose deletion had begun and template or runner copies that
// never finished.
func (b *Backend) finishInterrupted() {
	leftovers, _ := filepath.Glob(filepath.Join(b.dir, "sandboxes", ".deleting-*"))
	for _, g := range []string{"templates/*/.extract-*", "runners/*/.copy-*"} {
		m, _ := filepath.Glob(filepath.Join(b.dir, g))
		leftovers = append(leftovers, m...)
	}
	for _, p := range leftovers {
		if id, ok := strings.CutPrefix(filepath.Base(p), ".deleting-"); ok {
			_ = unmountWorkspace(p)
			if validID(id) {
				_ = b.cgroups.OpenCgroup(id).Remove()
			}
		}
		_ = removeAll(p)
	}
}

// Close gives up the state directory. Sandboxes keep running: a new
// Backend on the same directory finds them. They end when deleted, or when
// this process exits (bwrap runs with --die-with-parent).
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	return b.lock.Close()
}

// Health reports whether sandboxes can be created: the Backend is open and
// bubblewrap works here.
func (b *Backend) Health(ctx context.Context) error {
	if err := b.open(); err != nil {
		return err
	}
	if err := isolate.Available(ctx); err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
	}
	return nil
}

// open refuses work once Close gave the state directory up: another
// Backend may hold it now.
func (b *Backend) open() error {
	if b.closed.Load() {
		return fmt.Errorf("%w: backend closed", sandbox.ErrUnavailable)
	}
	return nil
}

// record is a sandbox's durable state: sandboxes/<id>/sandbox.json.
type record struct {
	ID                 string                  `json:"id"`
	Pool               string                  `json:"pool"`
	Generation         string                  `json:"generation"`
	Owner              string                  `json:"owner"`
	TemplateID         string                  `json:"templateId"`
	RunnerBinarySHA256 string                  `json:"runnerBinarySha256"`
	Created            time.Time               `json:"created"`
	Ready              time.Time               `json:"ready,omitzero"`
	Workdir            string                  `json:"workdir"`
	Refresh            []sandbox.RefreshResult `json:"refresh,omitempty"`
	// BootID, Bwrap and Init tell whether the sandbox still runs: bwrap
	// on the host, and the sandbox's pid 1 as the host sees it.
	BootID string  `json:"bootId"`
	Bwrap  procRef `json:"bwrap"`
	Init   procRef `json:"init"`
	// Runner is the runner's process as the host sees it, once it proved
	// its identity: the process whose limits every command inherits.
	Runner procRef `json:"runner,omitzero"`
	// Cgroup says the sandbox has a cgroup (named by its id) to read and
	// remove; WorkspaceBytes is the size of its workspace tmpfs (0: none).
	Cgroup         bool   `json:"cgroup,omitempty"`
	WorkspaceBytes uint64 `json:"workspaceBytes,omitempty"`
	// Network and Allow are the Spec's.
	Network sandbox.Network `json:"network,omitempty"`
	Allow   []string        `json:"allow,omitempty"`
	// Shape is the Spec's.
	Shape string `json:"shape,omitempty"`
}

func (b *Backend) sandboxDir(id string) string { return filepath.Join(b.dir, "sandboxes", id) }

func (b *Backend) socketPath(id string) string {
	return filepath.Join(b.sandboxDir(id), "runner.sock")
}

func (b *Backend) writeRecord(rec *record) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	b.recordWrites.Add(1)
	return atomicfile.Write(filepath.Join(b.sandboxDir(rec.ID), "sandbox.json"), append(data, '\n'), 0o600)
}

func (b *Backend) readRecord(id string) (*record, error) {
	data, err := os.ReadFile(filepath.Join(b.sandboxDir(id), "sandbox.json"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", sandbox.ErrNotFound, id)
		}
		return nil, err
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("local: %s: %w", filepath.Join(b.sandboxDir(id), "sandbox.json"), err)
	}
	if rec.ID != id {
		return nil, fmt.Errorf("local: %s/sandbox.json names sandbox %q", b.sandboxDir(id), rec.ID)
	}
	if err := b.readOwner(&rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// alive reports whether the recorded processes still run on this boot.
func (b *Backend) alive(rec *record) bool {
	return rec.BootID == b.boot && (rec.Init.alive() || rec.Bwrap.alive())
}

// view turns a record into a Sandbox; b.mu must be held.
func (b *Backend) view(rec *record) *sandbox.Sandbox { return b.viewOf(rec, b.creating[rec.ID]) }

// viewOf is view with creating (whether a Create of rec is under way, read
// under b.mu) given: it checks the processes without holding b.mu.
func (b *Backend) viewOf(rec *record, creating bool) *sandbox.Sandbox {
	s := &sandbox.Sandbox{
		ID: rec.ID, Pool: rec.Pool, Generation: rec.Generation, Owner: rec.Owner,
		TemplateID: rec.TemplateID, RunnerBinarySHA256: rec.RunnerBinarySHA256,
		Created: rec.Created, Ready: rec.Ready, Workdir: rec.Workdir,
		Refresh: slices.Clone(rec.Refresh), Network: rec.Network, Allow: slices.Clone(rec.Allow), Shape: rec.Shape,
	}
	switch {
	case creating && (rec.Bwrap.Pid == 0 || b.alive(rec)):
		s.State = sandbox.StateStarting
	case !b.alive(rec):
		s.State = sandbox.StateDead
	case rec.Ready.IsZero():
		s.State = sandbox.StateStarting
	default:
		s.State = sandbox.StateRunning
	}
	if s.State != sandbox.StateDead {
		s.Runner = runner.NewClient(dialUnix(b.socketPath(rec.ID)))
	}
	return s
}

// List returns the sandboxes recorded in the state directory that match
// filter, oldest first, each with its State checked against the host's
// processes now.
func (b *Backend) List(ctx context.Context, filter sandbox.Filter) ([]*sandbox.Sandbox, error) {
	if err := b.open(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Join(b.dir, "sandboxes"))
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	// The records are read without b.mu (each is replaced whole, by a
	// rename), so that a List does not hold up SetOwner and Create.
	var recs []*record
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !validID(e.Name()) {
			continue
		}
		rec, err := b.readRecord(e.Name())
		if errors.Is(err, sandbox.ErrNotFound) {
			continue // deleted meanwhile, or a Create that had not written yet
		}
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*sandbox.Sandbox
	for _, rec := range recs {
		s := b.view(rec)
		if s.State == sandbox.StateDead {
			// Perhaps read before its Create recorded the pids, and
			// viewed after it returned: read it again, under b.mu.
			again, err := b.readRecord(rec.ID)
			if errors.Is(err, sandbox.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			s = b.view(again)
		}
		if filter.Match(s) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(x, y *sandbox.Sandbox) int {
		if c := x.Created.Compare(y.Created); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	return out, nil
}

// SetOwner changes a running sandbox's owner from from to to, durably.
// Owner changes of one sandbox are serialised (the compare and the write
// are one step); those of different sandboxes, and their writes to disk,
// run in parallel.
func (b *Backend) SetOwner(ctx context.Context, id, from, to string) (*sandbox.Sandbox, error) {
	if err := b.open(); err != nil {
		return nil, err
	}
	if to == "" || len(to) > maxOwner {
		return nil, fmt.Errorf("%w: SetOwner: an owner has 1 to %d bytes, not %d", sandbox.ErrInvalidSpec, maxOwner, len(to))
	}
	if !validID(id) {
		return nil, fmt.Errorf("%w: %q", sandbox.ErrNotFound, id)
	}
	defer b.owners.lock(id)()
	rec, err := b.readRecord(id) // written only by atomic renames and setxattr: never half
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	creating := b.creating[id]
	b.mu.Unlock()
	s := b.viewOf(rec, creating) // the processes are checked outside b.mu
	if s.State != sandbox.StateRunning {
		return nil, fmt.Errorf("%w: sandbox %s is %s", sandbox.ErrNotRunning, id, s.State)
	}
	if rec.Owner != from {
		return nil, fmt.Errorf("%w: sandbox %s is owned by %q, not %q", sandbox.ErrOwnerConflict, id, rec.Owner, from)
	}
	rec.Owner = to
	if err := b.writeOwner(rec); err != nil {
		return nil, err
	}
	s.Owner = to
	return s, nil
}

// Delete kills the sandbox (its whole pid namespace) and removes its
// directory, workspace included. A sandbox that does not exist is already
// deleted: Delete returns nil.
func (b *Backend) Delete(ctx context.Context, id string) error {
	if err := b.open(); err != nil {
		return err
	}
	if !validID(id) {
		return nil
	}
	b.mu.Lock()
	p := b.procs[id]
	rec, err := b.readRecord(id)
	b.mu.Unlock()
	if errors.Is(err, sandbox.ErrNotFound) {
		if _, serr := os.Stat(b.sandboxDir(id)); serr != nil {
			return nil
		}
		rec = &record{ID: id} // a Create that crashed before its first write
	} else if err != nil {
		return err
	}
	// A frozen process does not die of SIGKILL until it thaws.
	if err := b.thawForDelete(id); err != nil {
		return fmt.Errorf("local: delete %s: %w", id, err)
	}
	if err := b.kill(rec, p); err != nil {
		return fmt.Errorf("local: delete %s: %w", id, err)
	}
	if err := b.removeFreezer(id); err != nil {
		return fmt.Errorf("local: delete %s: %w", id, err)
	}
	b.stopEgress(id) // after the kill: every attempt is recorded by now
	if err := b.cgroups.OpenCgroup(id).Remove(); err != nil {
		return fmt.Errorf("local: delete %s: %w", id, err)
	}
	if err := unmountWorkspace(b.sandboxDir(id)); err != nil {
		return fmt.Errorf("local: delete %s: %w", id, err)
	}
	unlock := b.owners.lock(id) // not while SetOwner writes into the directory
	b.mu.Lock()
	delete(b.procs, id)
	trash := filepath.Join(b.dir, "sandboxes", ".deleting-"+id)
	err = os.Rename(b.sandboxDir(id), trash)
	b.mu.Unlock()
	unlock()
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // a concurrent Delete won
		}
		return fmt.Errorf("local: delete %s: %w", id, err)
	}
	if err := removeAll(trash); err != nil {
		return fmt.Errorf("local: delete %s: %w", id, err)
	}
	return nil
}

// kill ends the sandbox: through its Process when this Backend started it,
// otherwise by the recorded pids (their start times guard against reuse).
// It returns once no process of the sandbox is left.
func (b *Backend) kill(rec *record, p *isolate.Process) error {
	if p != nil {
		if err := p.Kill(); err != nil {
			return err
		}
		_, err := p.Wait() // returns once the sandbox's pid 1 is gone
		return err
	}
	if rec.BootID != b.boot {
		return nil // recorded on an earlier boot: nothing of it runs
	}
	// The sandbox's pid 1 takes its whole pid namespace with it; bwrap's
	// group holds bwrap itself and anything caught before the namespace.
	err := errors.Join(rec.Init.kill(false), rec.Bwrap.kill(true))
	return errors.Join(err, waitGone(killLimit, rec.Init, rec.Bwrap))
}

// validID accepts the ids newID makes, so that an id never walks out of the
// state directory.
func validID(id string) bool {
	h, ok := strings.CutPrefix(id, "sb-")
	return ok && len(h) == 16 && strings.Trim(h, "0123456789abcdef") == ""
}

func newID() string { return "sb-" + randomHex(8) }

// dialUnix dials the runner's socket; a path too long for sun_path (108
// bytes) is reached through /proc/self/fd and a descriptor of its folder.
func dialUnix(path string) runner.DialFunc {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		if len(path) < 100 {
			return d.DialContext(ctx, "unix", path)
		}
		fd, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		defer unix.Close(fd)
		return d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd)+"/"+filepath.Base(path))
	}
}

// listenUnix makes the runner's listening socket at path (see dialUnix for
// long paths) and returns it as a file to hand to the sandbox; the socket
// file stays when the file is closed.
func listenUnix(path string) (*os.File, error) {
	ln, err := listenUnixAt(path)
	if err != nil {
		return nil, err
	}
	f, err := ln.File()
	_ = ln.Close()
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// listenUnixAt listens on a unix socket at path (see dialUnix for long
// paths); the socket file stays when the listener is closed.
func listenUnixAt(path string) (*net.UnixListener, error) {
	addr := path
	if len(path) >= 100 {
		fd, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		defer unix.Close(fd)
		addr = "/proc/self/fd/" + strconv.Itoa(fd) + "/" + filepath.Base(path)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	return ln, nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Pids are a running sandbox's processes as the host sees them.
type Pids struct {
	Bwrap  int // bwrap, the leader of its process group
	Init   int // the sandbox's pid 1 (bwrap's init)
	Runner int // the runner, pid 1's child
}

// Pids returns the host pids of a running sandbox, for operators and for
// tests that stop or kill a runner on purpose (SIGSTOP to cause missed
// heartbeats). ErrNotRunning when the sandbox is dead.
func (b *Backend) Pids(id string) (Pids, error) {
	if err := b.open(); err != nil {
		return Pids{}, err
	}
	if !validID(id) {
		return Pids{}, fmt.Errorf("%w: %q", sandbox.ErrNotFound, id)
	}
	b.mu.Lock()
	rec, err := b.readRecord(id)
	b.mu.Unlock()
	if err != nil {
		return Pids{}, err
	}
	if !b.alive(rec) {
		return Pids{}, fmt.Errorf("%w: sandbox %s is dead", sandbox.ErrNotRunning, id)
	}
	p := Pids{Bwrap: rec.Bwrap.Pid, Init: rec.Init.Pid}
	if c := children(rec.Init.Pid); len(c) > 0 {
		p.Runner = c[0]
	}
	return p, nil
}
