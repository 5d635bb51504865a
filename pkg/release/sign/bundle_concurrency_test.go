package sign_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"

	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// Cross-process writers: TestBundleWriterProcess is the child's body, run
// by TestConcurrentBundleWriters as a separate process of this test binary.
const (
	envWriter = "SLIPWAY_BUNDLE_WRITER"
	envRef    = "SLIPWAY_BUNDLE_REF"
	envKey    = "SLIPWAY_BUNDLE_KEY"
	envDir    = "SLIPWAY_BUNDLE_DIR"
)

func writerBuilder(id any) string { return fmt.Sprint("https://writer/", id) }

func TestBundleWriterProcess(t *testing.T) {
	id := os.Getenv(envWriter)
	if id == "" {
		t.Skip("run by TestConcurrentBundleWriters in a child process")
	}
	ref, err := sign.ParseDigest(os.Getenv(envRef))
	if err != nil {
		t.Fatal(err)
	}
	priv, err := os.ReadFile(os.Getenv(envKey))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := loadFastSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv(envDir)
	// Start together: say ready, wait for "go".
	if err := os.WriteFile(filepath.Join(dir, "ready-"+id), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no go signal")
		}
	}
	res, err := sign.Attest(context.Background(), ref, sv, provenance(t, ref, writerBuilder(id)), sign.WithOfflineNoTlog(), sign.WithBundle())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("writer %s: tag %s, bundle %s %s\n", id, res.Status, res.Bundle.Status, res.Bundle.Referrer)
}

// TestConcurrentBundleWriters runs attesters with different keys at once
// against docker-registry 2.8, where the referrers list is the tag
// schema's index, read-modified-written by each writer with no
// conditional request. Requests go through a proxy adding latency, which
// widens the window between a writer's read of the index and its write.
// It shows first that cosign's writer alone loses entries there, then that
// every Attest(WithBundle) entry survives: in one process (serialised) and
// from separate processes (read back, re-written when lost).
func TestConcurrentBundleWriters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts docker-registry and child processes")
	}
	reg := registrytest.NewDistribution(t)
	proxy := registrytest.StartFaultProxy(t, reg.URL())
	proxy.SetLatency(15 * time.Millisecond)
	const n = 3
	keys := make([]keyPair, n)
	for i := range keys {
		keys[i] = fastKeys(t)
	}
	off := sign.WithOfflineNoTlog()

	// cosign's writer alone, n at once, same subject.
	raw := pushRandom(t, proxy.Addr(), "raw")
	var wg sync.WaitGroup
	rawErrs := make(chan error, n)
	for i := range keys {
		b := rawBundle(t, keys[i].sv, provenance(t, raw, fmt.Sprintf("https://raw/%d", i)))
		wg.Go(func() { rawErrs <- ociremote.WriteAttestationNewBundleFormat(raw, b, attest.PredicateSLSAProvenanceV1) })
	}
	wg.Wait()
	close(rawErrs)
	for err := range rawErrs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("cosign's WriteAttestationNewBundleFormat, %d concurrent writers on the tag schema: %d of %d referrers listed", n, bundleReferrers(t, raw), n)

	check := func(t *testing.T, ref name.Digest) {
		t.Helper()
		for i, k := range keys {
			ver, err := sign.VerifyAttestations(context.Background(), ref, k.v, off, sign.WithBundle())
			if err != nil {
				t.Errorf("key %d: bundle lost: %v", i, err)
				continue
			}
			if got := sources(ver.Attestations, attSource); got[sign.SourceBundle] != 1 {
				t.Errorf("key %d: sources %v, want one bundle", i, got)
			}
		}
		if got := bundleReferrers(t, ref); got < n {
			t.Errorf("%d bundle referrers listed, want at least %d", got, n)
		}
	}

	t.Run("goroutines", func(t *testing.T) {
		ref := pushRandom(t, proxy.Addr(), "app")
		errs := make(chan error, n)
		stmt := provenance(t, ref, "b")
		for i := range keys {
			wg.Go(func() {
				_, err := sign.Attest(context.Background(), ref, keys[i].sv, stmt, off, sign.WithBundle())
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		check(t, ref)
	})

	t.Run("processes", func(t *testing.T) {
		ref := pushRandom(t, proxy.Addr(), "app")
		// The writers' .att entries are there already, so in the children
		// the tag step is a read (Unchanged) and the bundle writes start
		// together rather than staggered by the tag's own retries.
		for i, k := range keys {
			if _, err := sign.Attest(context.Background(), ref, k.sv, provenance(t, ref, writerBuilder(i)), off); err != nil {
				t.Fatal(err)
			}
		}
		dir := t.TempDir()
		cmds := make([]*exec.Cmd, n)
		outs := make([]bytes.Buffer, n)
		for i := range keys {
			keyFile := filepath.Join(dir, fmt.Sprintf("key-%d", i))
			if err := os.WriteFile(keyFile, keys[i].priv, 0o600); err != nil {
				t.Fatal(err)
			}
			cmds[i] = exec.Command(os.Args[0], "-test.run=^TestBundleWriterProcess$", "-test.count=1", "-test.v")
			cmds[i].Env = append(os.Environ(), envWriter+"="+fmt.Sprint(i), envRef+"="+ref.String(),
				envKey+"="+keyFile, envDir+"="+dir)
			cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
			if err := cmds[i].Start(); err != nil {
				t.Fatal(err)
			}
		}
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			ready, _ := filepath.Glob(filepath.Join(dir, "ready-*"))
			if len(ready) == n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d writers ready", len(ready), n)
			}
		}
		proxy.ResetStats()
		if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for i, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Errorf("writer %d: %v\n%s", i, err, outs[i].String())
				continue
			}
			for _, l := range strings.Split(outs[i].String(), "\n") {
				if strings.HasPrefix(l, "writer ") {
					t.Log(l)
				}
			}
		}
		// Bundle manifests are put by digest; a writer puts its own again
		// when its entry went missing from the index.
		// A writer's second put is the same manifest (same digest): were it
		// another, a stale index bringing the first entry back would list
		// the writer's bundle twice.
		puts, manifests := 0, map[string]bool{}
		for _, r := range proxy.Log() {
			if r.Method == "PUT" && strings.Contains(r.Path, "/manifests/sha256:") {
				puts++
				manifests[r.Path] = true
			}
		}
		t.Logf("%d writer processes put %d bundle manifests (%d re-written after a lost index entry)", n, puts, puts-n)
		if len(manifests) != n {
			t.Errorf("%d writer processes put %d different bundle manifests, want %d: a re-write must be the same manifest", n, len(manifests), n)
		}
		check(t, ref)
	})
}
