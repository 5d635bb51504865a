package registrytest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// fastRetry keeps go-containerregistry's retries but without its 1 s wait.
var fastRetry = remote.WithRetryBackoff(remote.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 3})

func TestPushThroughProxy(t *testing.T) {
	reg := NewDistribution(t)
	proxy := StartFaultProxy(t, reg.URL())
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(proxy.Addr() + "/slipway/test:v1")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		t.Fatalf("push through proxy: %v", err)
	}
	desc, err := remote.Head(ref, remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("head through proxy: %v", err)
	}
	if desc.Digest != want {
		t.Errorf("digest through proxy = %s, want %s", desc.Digest, want)
	}

	// Straight from the registry too: the push really landed there.
	direct, err := name.ParseReference(reg.Addr() + "/slipway/test:v1")
	if err != nil {
		t.Fatal(err)
	}
	if desc, err := remote.Head(direct, remote.WithContext(ctx)); err != nil || desc.Digest != want {
		t.Errorf("head from registry = %v, %v; want %s", desc, err, want)
	}

	// The upload's Location pointed back at the proxy: the blob PUTs went through it.
	var uploads int
	for _, r := range proxy.Log() {
		if r.Method == http.MethodPut && strings.Contains(r.Path, "/blobs/uploads/") {
			uploads++
			if r.Status != http.StatusCreated {
				t.Errorf("upload %s answered %d, want 201", r.Path, r.Status)
			}
		}
	}
	if uploads < 3 { // two layers and the config
		t.Errorf("saw %d blob upload PUTs through the proxy, want at least 3; log: %+v", uploads, proxy.Log())
	}
}

func TestPushRetriesFaults(t *testing.T) {
	reg := NewDistribution(t)
	proxy := StartFaultProxy(t, reg.URL())
	proxy.Inject(Rule{Method: http.MethodPut, PathContains: "/manifests/", Times: 1, Fault: Status(http.StatusServiceUnavailable)})
	proxy.Inject(Rule{Method: http.MethodHead, PathContains: "/blobs/", Times: 1, Fault: TooManyRequests("0")})
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(proxy.Addr() + "/slipway/retry:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithContext(t.Context()), fastRetry); err != nil {
		t.Fatalf("push with one 503 and one 429: %v", err)
	}
	if got := proxy.Faults(); got != 2 {
		t.Errorf("Faults() = %d, want 2", got)
	}
}

func TestDistributionClose(t *testing.T) {
	NeedDistribution(t)
	reg, err := StartDistribution(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pid := reg.cmd.Process.Pid
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(reg.Close)
	}
	wg.Wait()
	reg.Close()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("signal 0 to registry pid %d after Close: %v, want ESRCH", pid, err)
	}
	client := &http.Client{Timeout: 2 * time.Second}
	if resp, err := client.Get(reg.URL() + "/v2/"); err == nil {
		resp.Body.Close()
		t.Errorf("GET /v2/ after Close answered %s, want a connection error", resp.Status)
	}
}

func TestDistributionConfig(t *testing.T) {
	NeedDistribution(t)
	dir := t.TempDir()
	reg, err := StartDistribution(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	config, err := os.ReadFile(filepath.Join(dir, "config.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"addr: \"" + reg.Addr() + "\"", filepath.Join(dir, "storage"), "enabled: true"} {
		if !strings.Contains(string(config), want) {
			t.Errorf("config.yml lacks %q:\n%s", want, config)
		}
	}
	if !strings.HasPrefix(reg.Addr(), "127.0.0.1:") || reg.URL() != "http://"+reg.Addr() {
		t.Errorf("Addr() = %q, URL() = %q", reg.Addr(), reg.URL())
	}
}

func TestStartDistributionNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := StartDistribution(context.Background(), t.TempDir())
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("StartDistribution without the binary: %v, want ErrNotInstalled", err)
	}
	if !strings.Contains(err.Error(), "apt-get install docker-registry") {
		t.Errorf("error %q does not say how to install it", err)
	}
}

func TestStartPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	bin, err := exec.LookPath(DistributionBinary)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := startOnce(t.Context(), bin, t.TempDir(), l.Addr().String())
	if err == nil {
		reg.Close()
	}
	if !errors.Is(err, errPortTaken) {
		t.Fatalf("start on a taken port: %v, want errPortTaken", err)
	}
}

func TestStartFailures(t *testing.T) {
	tests := []struct {
		name, script, want string
	}{
		{"exits", "echo 'level=fatal msg=\"boom\"' >&2; exit 1", "boom"},
		// The sleep is a child of the shell: Close must kill the whole group,
		// or Wait would block on the stderr pipe the sleep still holds.
		{"never ready", "echo 'still starting' >&2; sleep 60", "still starting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "fake-registry")
			if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+tt.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			reg, err := startOnce(ctx, bin, dir, "127.0.0.1:1")
			if err == nil {
				reg.Close()
				t.Fatal("start succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q lacks the process output %q", err, tt.want)
			}
		})
	}
}
