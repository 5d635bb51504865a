// Command demo runs Slipway's main job on embedded defaults: an in-process
// registry (go-containerregistry's pkg/registry) on 127.0.0.1, a few sample
// images pushed to it, and the sample config tree beside this file linted,
// pinned by digest with a lock file, linted clean and re-pinned hermetically.
//
// It drives the real slipway binary ($SLIPWAY_BIN, default bin/slipway) so
// that every step is a command a CI pipeline would run. For a version-skew
// run (tools/skew.sh), $SLIPWAY_RUNTIME_BIN and $SLIPWAY_CONTROL_BIN name
// another build's binary for `runtime serve` and `control serve`, and
// $SLIPWAY_DEMO_RELEASE another build's release (its runner).
//
// With -kubernetes (make demo-kube) it runs the Kubernetes part instead: a
// real single-node cluster that routes Services (package kubetest: etcd,
// kube-apiserver, kube-controller-manager, kubelet, kube-proxy,
// containerd, agent-sandbox's controller) on this machine, Slipway's
// planes installed into it from a snapshot release (package incluster:
// deploy/overlays/single on the host's PostgreSQL), the pool rendered,
// applied, claimed from through the in-cluster runtime's Service, rolled
// out on the cluster with its proofs through that runtime, and a job
// through the in-cluster control plane. It says how to get what is
// missing and exits 0 when the cluster's binaries are not built or a node
// cannot run here.
//
//	go run ./examples/demo [-keep] [-kubernetes]
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	keep := flag.Bool("keep", false, "keep the work directory")
	kube := flag.Bool("kubernetes", false, "run the Kubernetes part on a single-node cluster of this machine (make demo-kube)")
	flag.Parse()
	do := run
	if *kube {
		do = runKube
	}
	if err := do(context.Background(), *keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, keep bool) error {
	d, err := setup(keep)
	if err != nil {
		return err
	}
	defer d.close()
	here, work, host := d.here, d.work, d.host
	// 2. Sample images: what a sandbox platform ships.
	for _, im := range []struct {
		repoTag   string
		platforms []string
	}{
		{"platform/control-plane:v1.4.0", nil},
		{"platform/runner:v0.9.2", nil},
		{"platform/workspace:2026.11", nil},
		{"library/busybox:latest", []string{"linux/amd64", "linux/arm64"}},
	} {
		dg, err := pushSample(host, im.repoTag, im.platforms)
		if err != nil {
			return err
		}
		fmt.Printf("  pushed %s/%s  %s\n", host, im.repoTag, dg)
	}

	// 3. The sample tree, with the registry's address filled in.
	tree := filepath.Join(work, "tree")
	if err := copyTree(filepath.Join(here, "tree"), tree, host); err != nil {
		return err
	}
	cfg := filepath.Join(here, "slipway-pin.yaml")
	lock := filepath.Join(work, "images.lock")
	sh := d.sh

	section("lint", "every mutable reference, with file:line:col (exit 1: findings)")
	if err := sh.run(1, "lint", "--config", cfg, "tree"); err != nil {
		return err
	}
	section("resolve", "tags to digests; the multi-arch busybox pins its index, or one platform")
	if err := sh.run(0, "resolve", host+"/platform/runner:v0.9.2", host+"/library/busybox"); err != nil {
		return err
	}
	if err := sh.run(0, "resolve", "--platform", "linux/arm64", host+"/library/busybox"); err != nil {
		return err
	}
	section("pin (dry run)", "what would change; nothing is written but the lock")
	if err := sh.run(0, "pin", "--config", cfg, "--lock", "images.lock", "tree"); err != nil {
		return err
	}
	section("pin --write", "rewrite in place, comments and layout kept")
	if err := sh.run(0, "pin", "--write", "--config", cfg, "--lock", "images.lock", "tree"); err != nil {
		return err
	}
	section("lint again", "clean (exit 0)")
	if err := sh.run(0, "lint", "--config", cfg, "tree"); err != nil {
		return err
	}
	section("hermetic re-pin", "only the lock is read; the registry is never asked; nothing left to change")
	if err := sh.run(0, "pin", "--write", "--refresh", "--hermetic", "--config", cfg, "--lock", "images.lock", "tree"); err != nil {
		return err
	}
	section("a pinned file", "tree/apps/runner.yaml")
	if err := cat(filepath.Join(tree, "apps", "runner.yaml")); err != nil {
		return err
	}
	section("the lock", "images.lock")
	if err := cat(lock); err != nil {
		return err
	}
	tmpl, err := templates(ctx, sh, work, host, filepath.Dir(filepath.Dir(here)))
	if err != nil {
		return err
	}
	if err := generations(ctx, sh, work, here, host, tmpl); err != nil {
		return err
	}
	fmt.Println("\ndemo: ok")
	return nil
}

// demo is what both parts of the demo start with.
type demo struct {
	bin, here, work, host string // slipway, this directory, the work directory, the registry
	sh                    shell
	close                 func()
	closers               []func() // run by close, last first
}

// setup finds the slipway binary, makes the work directory (removed by
// close unless keep), sets the demo's key password and starts the
// in-process registry on 127.0.0.1 (stopped by close).
func setup(keep bool) (*demo, error) {
	d, err := newDemo(keep)
	if err != nil {
		return nil, err
	}
	if err := d.startRegistry("127.0.0.1"); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// newDemo finds the slipway binary, makes the work directory (removed by
// close unless keep) and sets the demo's key password; it starts no
// registry (startRegistry does).
func newDemo(keep bool) (*demo, error) {
	bin := os.Getenv("SLIPWAY_BIN")
	if bin == "" {
		bin = "bin/slipway"
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("slipway binary %s: %w (run `make build` first)", bin, err)
	}
	_, self, _, _ := runtime.Caller(0)
	here := filepath.Dir(self)

	work, err := os.MkdirTemp("", "slipway-demo-")
	if err != nil {
		return nil, err
	}
	// The demo's key password, for the slipway processes it runs (a CI job
	// takes it from its secret store the same way).
	if _, ok := os.LookupEnv("COSIGN_PASSWORD"); !ok {
		os.Setenv("COSIGN_PASSWORD", "demo-only-password")
	}
	d := &demo{bin: bin, here: here, work: work, sh: shell{bin: bin, dir: work}}
	d.close = func() {
		for i := len(d.closers) - 1; i >= 0; i-- {
			d.closers[i]()
		}
		if keep {
			fmt.Printf("work directory kept: %s\n", work)
		} else {
			os.RemoveAll(work)
		}
	}
	return d, nil
}

// startRegistry starts go-containerregistry's in-process registry on ip
// (127.0.0.1, or the node's bridge for the in-cluster planes), stopped by
// close.
func (d *demo) startRegistry(ip string) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return fmt.Errorf("the demo's registry on %s: %w", ip, err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	d.host = ln.Addr().String()
	d.closers = append(d.closers, func() { srv.Close() })
	section("registry", "go-containerregistry in-process registry at http://%s", d.host)
	skew(d.bin)
	return nil
}

// skew says which build serves which plane when a version-skew run gave
// another build's binaries or release.
func skew(bin string) {
	rel := os.Getenv("SLIPWAY_DEMO_RELEASE")
	if os.Getenv("SLIPWAY_RUNTIME_BIN") == "" && os.Getenv("SLIPWAY_CONTROL_BIN") == "" && rel == "" {
		return
	}
	section("version skew", "the planes from two builds of Slipway")
	for _, p := range []struct{ what, bin string }{
		{"the CLI", bin}, {"runtime serve", planeBin(shell{bin: bin}, "SLIPWAY_RUNTIME_BIN")}, {"control serve", planeBin(shell{bin: bin}, "SLIPWAY_CONTROL_BIN")},
	} {
		v, err := exec.Command(p.bin, "version").Output()
		if err != nil {
			v = []byte(err.Error())
		}
		fmt.Printf("  %-14s %s", p.what, v)
	}
	if rel != "" {
		fmt.Printf("  %-14s from the release in %s\n", "the runner", rel)
	}
}

// planeBin is the binary that serves a plane: $env (another build's, for
// a version-skew run) or the demo's.
func planeBin(sh shell, env string) string {
	if b := os.Getenv(env); b != "" {
		return b
	}
	return sh.bin
}

func section(title, format string, args ...any) {
	fmt.Printf("\n== %s: %s\n", title, fmt.Sprintf(format, args...))
}

type shell struct{ bin, dir string }

// run runs slipway with args and checks its exit code.
func (s shell) run(wantCode int, args ...string) error {
	fmt.Printf("$ slipway %s\n", strings.Join(args, " "))
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	out := newIndent(os.Stdout)
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	out.Flush()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return err
	}
	if code != wantCode {
		return fmt.Errorf("slipway %s exited %d, want %d", strings.Join(args, " "), code, wantCode)
	}
	fmt.Printf("  (exit %d)\n", code)
	return nil
}

// indent writes a command's output two spaces in, a whole line at a time:
// the output comes through a pipe in pieces that may end mid-line, and a
// line written in pieces would be cut, or split by another's output.
// Flush writes what is left of an unfinished last line.
type indent struct {
	w    io.Writer
	part []byte
}

func newIndent(w io.Writer) *indent { return &indent{w: w} }

func (i *indent) Write(p []byte) (int, error) {
	i.part = append(i.part, p...)
	n := bytes.LastIndexByte(i.part, '\n')
	if n < 0 {
		return len(p), nil
	}
	lines := string(i.part[:n])
	i.part = append(i.part[:0], i.part[n+1:]...)
	_, err := fmt.Fprintf(i.w, "  %s\n", strings.ReplaceAll(lines, "\n", "\n  "))
	return len(p), err
}

func (i *indent) Flush() {
	if len(i.part) > 0 {
		fmt.Fprintf(i.w, "  %s\n", i.part)
		i.part = i.part[:0]
	}
}

func cat(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fmt.Print(indentText(string(b)))
	return nil
}

// pushSample pushes a small, deterministic image (one index per platform list).
func pushSample(host, repoTag string, platforms []string) (string, error) {
	tag, err := name.NewTag(host + "/" + repoTag)
	if err != nil {
		return "", err
	}
	if len(platforms) == 0 {
		img, err := sampleImage(repoTag, "linux/amd64")
		if err != nil {
			return "", err
		}
		if err := remote.Write(tag, img); err != nil {
			return "", err
		}
		d, err := img.Digest()
		return d.String(), err
	}
	var adds []mutate.IndexAddendum
	for _, p := range platforms {
		img, err := sampleImage(repoTag, p)
		if err != nil {
			return "", err
		}
		pl, err := v1.ParsePlatform(p)
		if err != nil {
			return "", err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: pl}})
	}
	idx := mutate.AppendManifests(empty.Index, adds...)
	if err := remote.WriteIndex(tag, idx); err != nil {
		return "", err
	}
	d, err := idx.Digest()
	return d.String(), err
}

func sampleImage(repoTag, platform string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := []byte("slipway demo image " + repoTag + " for " + platform + "\n")
	if err := tw.WriteHeader(&tar.Header{Name: "etc/slipway-demo", Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(0, 0)}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(body); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	pl, err := v1.ParsePlatform(platform)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = pl.OS, pl.Architecture, pl.Variant
	return mutate.ConfigFile(img, cf)
}

// copyTree copies the sample tree, writing the registry's address where the files say REGISTRY.
func copyTree(src, dst, host string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if host != "" {
			b = bytes.ReplaceAll(b, []byte("REGISTRY"), []byte(host))
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, info.Mode().Perm())
	})
}
