package rollout_test

import (
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"slices"
	"sync"
	"testing"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/registrytest"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

// world is the registry with the runner and template images that every
// test of the package rolls out on, built once (building the runner and
// the busybox rootfs is most of a test's setup). Tests only add images to
// it (generations, relabelled templates), each under names of its own.
var world struct {
	once sync.Once
	tb   *packageTB
	w    *runtimetest.World
	err  error
}

// signer is the evidence signing key of every test, made once (scrypt
// makes a key slow to encrypt and decrypt under -race).
var signer struct {
	once sync.Once
	sv   signature.SignerVerifier
	err  error
}

func sharedSigner(t *testing.T) signature.SignerVerifier {
	t.Helper()
	signer.once.Do(func() {
		priv, _, err := sign.GenerateKeys([]byte("pw"))
		if err == nil {
			signer.sv, err = sign.LoadSigner(priv, []byte("pw"))
		}
		signer.err = err
	})
	if signer.err != nil {
		t.Fatalf("the shared signing key: %v", signer.err)
	}
	return signer.sv
}

func TestMain(m *testing.M) {
	code := m.Run()
	if world.tb != nil {
		world.tb.cleanup()
	}
	os.Exit(code)
}

// sharedWorld returns the package's world, building it on first use.
func sharedWorld(t *testing.T) *runtimetest.World {
	t.Helper()
	world.once.Do(func() {
		world.tb = &packageTB{}
		done := make(chan struct{})
		go func() { // Fatal ends this goroutine, as testing does a test's
			defer close(done)
			world.w = runtimetest.New(world.tb, registrytest.NewInProcess(world.tb))
		}()
		<-done
		world.err = world.tb.err
	})
	if world.err != nil {
		t.Fatalf("the shared registry and images: %v", world.err)
	}
	return world.w
}

// packageTB is the testing.TB of fixtures that outlive one test: its
// temporary folders and cleanups last until TestMain ends, and Fatal
// ends the goroutine that builds the fixture with an error. Only the
// methods below are called (the embedded TB is nil).
type packageTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
	err      error
}

func (p *packageTB) Helper() {}

func (p *packageTB) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}

func (p *packageTB) TempDir() string {
	dir, err := os.MkdirTemp("", "slipway-rollout-test-")
	if err != nil {
		p.Fatal(err)
	}
	p.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func (p *packageTB) Fatal(args ...any) { p.fail(errors.New(fmt.Sprint(args...))) }

func (p *packageTB) Fatalf(format string, args ...any) { p.fail(fmt.Errorf(format, args...)) }

func (p *packageTB) fail(err error) {
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
	goruntime.Goexit()
}

// cleanup runs the cleanups, last registered first.
func (p *packageTB) cleanup() {
	p.mu.Lock()
	fs := slices.Clone(p.cleanups)
	p.mu.Unlock()
	for _, f := range slices.Backward(fs) {
		f()
	}
}
