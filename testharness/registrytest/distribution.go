package registrytest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/testharness/need"
)

// ErrNotInstalled is returned by StartDistribution when the docker-registry
// binary is not on PATH, so that callers may choose to skip rather than fail.
var ErrNotInstalled = errors.New("docker-registry not found on PATH (apt-get install docker-registry)")

// DistributionBinary is the name of the registry binary looked up on PATH.
const DistributionBinary = "docker-registry"

// StartTimeout bounds how long StartDistribution waits for the registry to
// answer GET /v2/ with 200, unless the context's deadline is sooner.
const StartTimeout = 15 * time.Second

// maxPortAttempts bounds the retries when the free port picked for the
// registry is taken by someone else before the registry binds it.
const maxPortAttempts = 5

// Distribution is a running Debian docker-registry (distribution 2.8) process
// listening on 127.0.0.1, with filesystem storage and deletes enabled.
// Stop it with Close.
type Distribution struct {
	addr    string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the process has been waited for
	waitErr error         // set before exited is closed
	stderr  *tailBuffer

	closeOnce sync.Once
}

// NewDistribution starts a registry in tb.TempDir and stops it when the test
// and its subtests complete. It leaves the test out as NeedDistribution does,
// and calls tb.Fatalf if the registry does not start.
func NewDistribution(tb testing.TB) *Distribution {
	tb.Helper()
	NeedDistribution(tb)
	d, err := StartDistribution(context.Background(), tb.TempDir())
	if err != nil {
		tb.Fatalf("start registry: %v", err)
	}
	tb.Cleanup(d.Close)
	return d
}

// NeedDistribution leaves tb out under -short ("left out by -short: needs
// Debian's docker-registry"), and when docker-registry is not on PATH skips
// it naming the package, or fails it when CI=true (package need). A test that
// calls StartDistribution itself calls it first.
func NeedDistribution(tb testing.TB) {
	tb.Helper()
	need.Short(tb, "Debian's docker-registry")
	need.Binary(tb, DistributionBinary, "apt-get install docker-registry (make deps)")
}

// StartDistribution writes dir/config.yml, starts docker-registry with it on a
// free port of 127.0.0.1 and returns once GET /v2/ answers 200. Blobs and
// manifests are stored under dir/storage. ctx bounds the start only (at most
// StartTimeout); the process runs until Close. If another process takes the
// chosen port first, it starts again on a new one.
func StartDistribution(ctx context.Context, dir string) (*Distribution, error) {
	bin, err := exec.LookPath(DistributionBinary)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotInstalled, err)
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		d, err := startOnce(ctx, bin, dir, addr)
		if errors.Is(err, errPortTaken) && attempt < maxPortAttempts {
			continue
		}
		return d, err
	}
}

var errPortTaken = errors.New("port taken")

// startOnce starts bin with a config for addr and waits until it is ready.
func startOnce(ctx context.Context, bin, dir, addr string) (*Distribution, error) {
	config := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(config, distributionConfig(dir, addr), 0o644); err != nil {
		return nil, fmt.Errorf("write registry config: %w", err)
	}
	d := &Distribution{
		addr:   addr,
		exited: make(chan struct{}),
		stderr: &tailBuffer{max: 4096},
	}
	d.cmd = exec.Command(bin, "serve", config)
	d.cmd.Dir = dir
	d.cmd.Stdout = d.stderr
	d.cmd.Stderr = d.stderr
	d.cmd.SysProcAttr = sysProcAttr()
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	}()
	if err := d.waitReady(ctx); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// waitReady polls GET /v2/ until it answers 200, the process exits or ctx ends.
func (d *Distribution) waitReady(ctx context.Context) error {
	// A ping must not outlive the process: if ours failed to bind, someone
	// else's listener may accept and never answer.
	pingCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-d.exited:
			cancel()
		case <-pingCtx.Done():
		}
	}()
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok := d.ping(pingCtx, client)
		select {
		case <-d.exited:
			return d.exitError()
		default:
		}
		if ok {
			return nil
		}
		select {
		case <-d.exited:
			return d.exitError()
		case <-ctx.Done():
			return fmt.Errorf("registry at %s not ready: %w; output: %s", d.addr, ctx.Err(), d.stderr.String())
		case <-tick.C:
		}
	}
}

func (d *Distribution) ping(ctx context.Context, client *http.Client) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.URL()+"/v2/", nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (d *Distribution) exitError() error {
	out := d.stderr.String()
	if strings.Contains(out, "address already in use") {
		return fmt.Errorf("registry on %s: %w", d.addr, errPortTaken)
	}
	return fmt.Errorf("registry on %s exited during start: %w; output: %s", d.addr, d.waitErr, out)
}

// Addr returns the registry's host and port, "127.0.0.1:port", which is also
// the registry part of image references pushed to it.
func (d *Distribution) Addr() string { return d.addr }

// URL returns the registry's base URL, "http://127.0.0.1:port".
func (d *Distribution) URL() string { return "http://" + d.addr }

// Close kills the registry's process group and waits for the process to be
// gone. It is safe to call more than once and from several goroutines.
func (d *Distribution) Close() {
	d.closeOnce.Do(func() {
		killGroup(d.cmd.Process.Pid)
	})
	<-d.exited
}

// distributionConfig is a minimal distribution 0.1 configuration: quiet logs,
// filesystem storage under dir, deletes on, no health checks and no redis.
func distributionConfig(dir, addr string) []byte {
	return fmt.Appendf(nil, `version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %q
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %q
health:
  storagedriver:
    enabled: false
`, filepath.Join(dir, "storage"), addr)
}

// freeAddr asks the kernel for a free port on 127.0.0.1. The port is released
// before it is returned, so another process may take it first.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(string(b.buf))
}
