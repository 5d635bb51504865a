package kubefleet_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

const runtimeToken = "kubefleet-test-runtime-token-0123456789"

// runtimeProver proves through a real runtime on the Kubernetes sandbox
// backend (slipway runtime serve --backend kubernetes, in-process): a
// proof claim labelled slipway.dev/proof=true on the generation's warm
// pool, the checks run through the runner in the pod by pod exec, and the
// claim deleted. after, when set, runs once after a proof (a test's hook
// for a fault, such as the API server going away).
type runtimeProver struct {
	c     *runtimeapi.Client
	mu    sync.Mutex
	after func()
}

// startRuntime runs the runtime on w's cluster, following w's config
// repository, until the test ends. It keeps its runs' checkpoints, signed
// with a key of the test's (a drain may move runs).
func startRuntime(t testing.TB, w *world) *runtimeProver {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve.Run(ctx, serve.Config{Repo: w.dir, State: t.TempDir(), Listen: "127.0.0.1:0", Token: runtimeToken,
			SyncInterval: 200 * time.Millisecond, Verify: runtime.Verify{Skip: true}, CheckpointSigner: testSigner(t),
			Backend: serve.BackendKubernetes, Kubeconfig: w.c.Kubeconfig(), Namespace: w.ns}, func(a string) { addr <- a })
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Logf("runtime on the cluster: %v", err)
		}
	})
	select {
	case a := <-addr:
		c, err := runtimeapi.NewClient("http://"+a, runtimeToken)
		if err != nil {
			t.Fatal(err)
		}
		return &runtimeProver{c: c}
	case err := <-done:
		t.Fatalf("runtime on the cluster: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the runtime on the cluster did not start")
	}
	return nil
}

func (p *runtimeProver) Prove(ctx context.Context, pool string, req runtimeapi.ProofRequest) (*runtimeapi.ProofResult, error) {
	res, err := p.c.Prove(ctx, pool, req)
	p.mu.Lock()
	after := p.after
	p.after = nil
	p.mu.Unlock()
	if after != nil {
		after()
	}
	return res, err
}

// CheckpointGeneration moves the runs of gen through the runtime's
// checkpoints (the fleet's Mover).
func (p *runtimeProver) CheckpointGeneration(ctx context.Context, pool, gen string) (*runtimeapi.CheckpointGenerationResult, error) {
	return p.c.CheckpointGeneration(ctx, pool, gen)
}

var signer struct {
	once sync.Once
	sv   signature.SignerVerifier
	err  error
}

// testSigner is a signing key made once for the package's tests.
func testSigner(t testing.TB) signature.SignerVerifier {
	t.Helper()
	signer.once.Do(func() {
		priv, _, err := sign.GenerateKeys([]byte("pw"))
		if err == nil {
			signer.sv, err = sign.LoadSigner(priv, []byte("pw"))
		}
		signer.err = err
	})
	if signer.err != nil {
		t.Fatalf("the test's signing key: %v", signer.err)
	}
	return signer.sv
}
