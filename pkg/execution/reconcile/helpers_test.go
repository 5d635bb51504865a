package reconcile

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/isolate"
	"github.com/slipway-dev/slipway/pkg/release/template"
)

// fixtures are built once per test binary: the runner (static) and a
// busybox template image.
var fixtures struct {
	once   sync.Once
	err    error
	dir    string
	runner sandbox.RunnerBinary
	image  v1.Image
	digest string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtures.dir != "" {
		_ = os.RemoveAll(fixtures.dir)
	}
	os.Exit(code)
}

func setup(tb testing.TB) {
	tb.Helper()
	fixtures.once.Do(func() { fixtures.err = buildFixtures() })
	if fixtures.err != nil {
		tb.Fatal(fixtures.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := isolate.Available(ctx); err != nil {
		tb.Fatalf("bwrap is needed (make deps): %v", err)
	}
}

func buildFixtures() error {
	dir, err := os.MkdirTemp("", "slipway-reconcile-test-")
	if err != nil {
		return err
	}
	fixtures.dir = dir
	bin := filepath.Join(dir, "slipway-runner")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "../../../cmd/slipway-runner")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build cmd/slipway-runner: %v\n%s", err, out)
	}
	if fixtures.runner, err = sandbox.RunnerFromFile(bin, runner.ProtocolVersion); err != nil {
		return err
	}
	base := filepath.Join(dir, "base")
	if out, err := exec.Command("bash", "../../../fixtures/base/busybox-rootfs.sh", base).CombinedOutput(); err != nil {
		return fmt.Errorf("busybox-rootfs.sh: %v\n%s", err, out)
	}
	img, _, err := template.ImageFromDir(context.Background(), base, time.Unix(0, 0), v1.Platform{OS: "linux", Architecture: "amd64"}, []string{"PATH=/bin:/usr/bin"})
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	c := cfg.Config
	c.WorkingDir = "/workspace"
	if img, err = mutate.Config(img, c); err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fixtures.image, fixtures.digest = img, d.String()
	return nil
}

// world is a real local backend, a real run store and the records, in one
// state directory, as a runtime has them.
type world struct {
	dir     string
	backend *local.Backend
	store   *runs.SQLite
	records *Records
}

func newWorld(tb testing.TB) *world {
	tb.Helper()
	setup(tb)
	ctx := context.Background()
	dir := tb.TempDir()
	b, err := local.New(filepath.Join(dir, "sandboxes"))
	if err != nil {
		tb.Fatal(err)
	}
	st, err := runs.OpenSQLite(ctx, filepath.Join(dir, runs.StateFile))
	if err != nil {
		tb.Fatal(err)
	}
	rs, err := OpenRecords(ctx, filepath.Join(dir, RecordsFile))
	if err != nil {
		tb.Fatal(err)
	}
	w := &world{dir: dir, backend: b, store: st, records: rs}
	tb.Cleanup(func() {
		if all, err := b.List(context.Background(), sandbox.Filter{}); err == nil {
			for _, s := range all {
				_ = b.Delete(context.Background(), s.ID)
			}
		}
		_ = b.Close()
		_ = st.Close()
		_ = rs.Close()
	})
	return w
}

// create starts a real sandbox of pool p, generation gen, owned by owner.
func (w *world) create(tb testing.TB, pool, gen, owner string) *sandbox.Sandbox {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := w.backend.Create(ctx, sandbox.Spec{Pool: pool, Generation: gen, Owner: owner, Template: fixtures.image,
		TemplateID: fixtures.digest, Runner: fixtures.runner})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// run records run id's manifest with status st on sandbox sb at attempt.
func (w *world) run(tb testing.TB, id, pool, sb string, attempt int, st runmanifest.Status) {
	tb.Helper()
	m := &runmanifest.Manifest{RunID: id, Pool: pool, SandboxID: sb, AllocationAttempt: attempt, Generation: "g-1",
		WorkspaceTemplateID: fixtures.digest, Status: runmanifest.StatusGranted}
	ctx := context.Background()
	if err := w.store.Create(ctx, m); err != nil {
		tb.Fatal(err)
	}
	if st != runmanifest.StatusGranted {
		if err := w.store.Update(ctx, id, func(m *runmanifest.Manifest) error { m.Status = st; return nil }); err != nil {
			tb.Fatal(err)
		}
	}
}

// kill kills sandbox id's processes: it is dead, its folder left.
func (w *world) kill(tb testing.TB, id string) {
	tb.Helper()
	p, err := w.backend.Pids(id)
	if err != nil {
		tb.Fatal(err)
	}
	_ = syscall.Kill(-p.Bwrap, syscall.SIGKILL)
	_ = syscall.Kill(p.Init, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for {
		all, err := w.backend.List(context.Background(), sandbox.Filter{State: sandbox.StateDead})
		if err != nil {
			tb.Fatal(err)
		}
		for _, s := range all {
			if s.ID == id {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("sandbox %s is not dead 10 s after its kill", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sandboxes returns the backend's sandboxes by id.
func (w *world) sandboxes(tb testing.TB) map[string]*sandbox.Sandbox {
	tb.Helper()
	all, err := w.backend.List(context.Background(), sandbox.Filter{})
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]*sandbox.Sandbox{}
	for _, s := range all {
		out[s.ID] = s
	}
	return out
}

// alive says sandbox s is running and its runner answers.
func alive(tb testing.TB, w *world, s *sandbox.Sandbox) {
	tb.Helper()
	got := w.sandboxes(tb)[s.ID]
	if got == nil || got.State != sandbox.StateRunning {
		tb.Fatalf("live sandbox %s was touched: %+v", s.ID, got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := got.Ping(ctx); err != nil {
		tb.Fatalf("live sandbox %s does not answer: %v", s.ID, err)
	}
}

// gone says nothing is left of sandbox id: no folder, no process.
func gone(tb testing.TB, w *world, id string) {
	tb.Helper()
	left, err := w.backend.Leftovers(context.Background(), id)
	if err != nil {
		tb.Fatal(err)
	}
	if len(left) > 0 {
		tb.Fatalf("sandbox %s: left over: %v", id, left)
	}
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// recordsOf returns every record, open and closed.
func recordsOf(tb testing.TB, rs *Records) []Record {
	tb.Helper()
	all, err := rs.query(context.Background(), `SELECT `+recordColumns+` FROM cleanup ORDER BY id`)
	if err != nil {
		tb.Fatal(err)
	}
	return all
}
