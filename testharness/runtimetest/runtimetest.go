package runtimetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/release/template"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// Root is the module's root folder (where go.mod is), found upwards from
// the test's working directory.
func Root(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("runtimetest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// World is a registry holding a runner image and a template image.
type World struct {
	Host string
	// Runner and Template are digest references.
	Runner, Template string
	seq              atomic.Int64
}

var platform = v1.Platform{OS: "linux", Architecture: "amd64"}

// New pushes a real runner image and a busybox template (workdir
// /workspace) to host.
func New(tb testing.TB, host string) *World {
	tb.Helper()
	root := Root(tb)
	dir := tb.TempDir()
	bin := filepath.Join(dir, "slipway-runner")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/slipway-runner")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build runner: %v\n%s", err, out)
	}
	base := filepath.Join(dir, "base")
	if out, err := exec.Command("bash", filepath.Join(root, "fixtures/base/busybox-rootfs.sh"), base).CombinedOutput(); err != nil {
		tb.Fatalf("busybox-rootfs.sh: %v\n%s", err, out)
	}
	ctx := context.Background()
	w := &World{Host: host}
	rimg, closeR, err := sandbox.RunnerImage(ctx, bin, time.Unix(0, 0), platform, runner.ProtocolVersion)
	if err != nil {
		tb.Fatal(err)
	}
	defer closeR()
	w.Runner = registrytest.Push(tb, host+"/platform/runner:v1", rimg).String()
	timg, closeT, err := template.ImageFromDir(ctx, base, time.Unix(0, 0), platform, []string{"PATH=/bin:/usr/bin"})
	if err != nil {
		tb.Fatal(err)
	}
	defer closeT()
	cfg, err := timg.ConfigFile()
	if err != nil {
		tb.Fatal(err)
	}
	c := cfg.Config
	c.WorkingDir = "/workspace"
	if timg, err = mutate.Config(timg, c); err != nil {
		tb.Fatal(err)
	}
	w.Template = registrytest.Push(tb, host+"/templates/busybox:v1", timg).String()
	return w
}

// ControlPlane pushes a new control-plane image (random content) and
// returns its digest reference.
func (w *World) ControlPlane(tb testing.TB) string {
	tb.Helper()
	img, err := random.Image(32, 1)
	if err != nil {
		tb.Fatal(err)
	}
	return registrytest.Push(tb, fmt.Sprintf("%s/platform/cp:%d", w.Host, w.seq.Add(1)), img).String()
}

// TemplateWithTests pushes the world's template again with tests recorded
// in its label (as template build records them) and returns its digest
// reference.
func (w *World) TemplateWithTests(tb testing.TB, tests []templatemeta.Test) string {
	tb.Helper()
	b, err := json.Marshal(tests)
	if err != nil {
		tb.Fatal(err)
	}
	return w.relabel(tb, w.Template, "templates/busybox:t", func(l map[string]string) { clear(l); l[templatemeta.LabelTests] = string(b) })
}

// TemplateAsUser pushes the world's template again with its config's User
// set to user ("uid[:gid]", as a template build records it) and returns its
// digest reference.
func (w *World) TemplateAsUser(tb testing.TB, user string) string {
	tb.Helper()
	return w.reconfigure(tb, w.Template, "templates/busybox:u", func(c *v1.Config) { c.User = user })
}

// TemplateWithEntrypoint pushes the world's template again with its
// config's Entrypoint set to entrypoint (say /bin/sleep 86400: a
// workspace container that blocks, where a pod runs the image's own
// command) and returns its digest reference.
func (w *World) TemplateWithEntrypoint(tb testing.TB, entrypoint ...string) string {
	tb.Helper()
	return w.reconfigure(tb, w.Template, "templates/busybox:e", func(c *v1.Config) { c.Entrypoint = entrypoint })
}

// relabel pushes image ref again with its labels changed by edit, under
// repoTag plus a sequence number, and returns its digest reference.
func (w *World) relabel(tb testing.TB, ref, repoTag string, edit func(map[string]string)) string {
	tb.Helper()
	return w.reconfigure(tb, ref, repoTag, func(c *v1.Config) {
		labels := map[string]string{}
		for k, v := range c.Labels {
			labels[k] = v
		}
		edit(labels)
		c.Labels = labels
	})
}

// reconfigure pushes image ref again with its config changed by edit,
// under repoTag plus a sequence number, and returns its digest reference.
func (w *World) reconfigure(tb testing.TB, ref, repoTag string, edit func(*v1.Config)) string {
	tb.Helper()
	d, err := name.NewDigest(ref)
	if err != nil {
		tb.Fatal(err)
	}
	img, err := remote.Image(d)
	if err != nil {
		tb.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		tb.Fatal(err)
	}
	c := cf.Config
	edit(&c)
	if img, err = mutate.Config(img, c); err != nil {
		tb.Fatal(err)
	}
	return registrytest.Push(tb, fmt.Sprintf("%s/%s%d", w.Host, repoTag, w.seq.Add(1)), img).String()
}

// Generation makes a generation of pool with a new control plane, the
// world's runner, and template (the world's when ""), following from
// (nil: the first, protocols 1..1).
func (w *World) Generation(tb testing.TB, pool string, from *generation.Generation, templateRef string) *generation.Generation {
	tb.Helper()
	if templateRef == "" {
		templateRef = w.Template
	}
	var compat *generation.Compatibility
	if from == nil {
		compat = &generation.Compatibility{ControlPlaneProtocol: generation.Range{Min: 1, Max: 1}, RunnerProtocol: generation.Range{Min: 1, Max: 1}}
	}
	g, err := generation.New(pool, from, map[generation.Kind]generation.Pin{
		generation.ControlPlane: {Image: w.ControlPlane(tb)}, generation.Runner: {Image: w.Runner}, generation.WorkspaceTemplate: {Image: templateRef},
	}, compat)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// Desired is a desired state with one pool: generations gs, the first
// active, the others warming (as a rollout in progress has them), each
// warmSize warm, refilled fast.
func Desired(rev, poolName string, warmSize int, gs ...*generation.Generation) *runtime.Desired {
	p := pool.Default(poolName)
	p.Spec.WarmSize = warmSize
	p.Spec.RefillPerSecond = 1000
	st := pool.NewState(poolName)
	pd := &runtime.PoolDesired{Pool: p, State: st, Generations: map[string]*generation.Generation{}, Refused: map[string]string{}}
	for i, g := range gs {
		state := pool.Warming
		if i == 0 {
			state = pool.Active
		}
		st.Generations = append(st.Generations, pool.GenState{ID: g.ID, Sequence: g.Sequence, State: state, WarmSize: warmSize})
		pd.Generations[g.ID] = g
	}
	return &runtime.Desired{Revision: rev, Pools: map[string]*runtime.PoolDesired{poolName: pd}}
}

// RunnerWithLabel pushes the world's runner image again with its sha256
// label replaced by sha256hex: a runner image that lies about its binary
// (sandboxes of it must never start). It returns its digest reference.
func (w *World) RunnerWithLabel(tb testing.TB, sha256hex string) string {
	tb.Helper()
	return w.relabel(tb, w.Runner, "platform/runner:l", func(l map[string]string) { l[sandbox.LabelRunnerSHA256] = sha256hex })
}
