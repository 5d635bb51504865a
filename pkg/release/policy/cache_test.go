package policy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/slipway-dev/slipway/pkg/release/policy"
)

// A cached result is the verified one, answered without the registry; a
// policy whose key file changed under the same document misses.
func TestCache(t *testing.T) {
	f := newFixture(t)
	rules := "  rules:\n    - name: any\n      signatures:\n        keys: [release]\n"
	p := f.policy(rules, false)
	d := f.push("runners/agent")
	f.publish(d, f.release, builder, buildType, false)
	c := policy.NewCache()
	ctx := context.Background()
	target := policy.Target{Ref: d.String(), Kind: "runner"}
	first, err := p.Verify(ctx, target, policy.WithCache(c))
	if err != nil || !first.Verified {
		t.Fatalf("verify: %v %+v", err, first)
	}
	first.Checks[0].Reason = "changed by the caller"
	second, err := p.Verify(ctx, target, policy.WithCache(c))
	if err != nil || !second.Verified || second.Checks[0].Reason == "changed by the caller" {
		t.Fatalf("cached: %v %+v", err, second)
	}
	if h, m := c.Stats(); h != 1 || m != 1 {
		t.Fatalf("hits %d misses %d", h, m)
	}
	// The same document trusting another key under the same file name.
	roguePub, _ := writeKey(t, t.TempDir(), "rogue")
	b, err := os.ReadFile(roguePub)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "release.pub"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	p2 := f.policy(rules, false)
	if p2.Digest != p.Digest {
		t.Fatal("the document changed")
	}
	res, err := p2.Verify(ctx, target, policy.WithCache(c))
	if err != nil || res.Verified {
		t.Fatalf("a changed key answered from the cache: %v %+v", err, res)
	}
}

// OpenCache shares passes between caches (processes) opened on one
// directory, never refusals: an image signed later is seen by the next.
func TestOpenCache(t *testing.T) {
	f := newFixture(t)
	p := f.policy("  rules:\n    - name: any\n      signatures:\n        keys: [release]\n", false)
	signed, unsigned := f.push("runners/agent"), f.push("runners/other")
	f.publish(signed, f.release, builder, buildType, false)
	dir := filepath.Join(t.TempDir(), "verify")
	ctx := context.Background()
	verify := func(d string) (*policy.Result, *policy.Cache) {
		t.Helper()
		c, err := policy.OpenCache(dir)
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.Verify(ctx, policy.Target{Ref: d, Kind: "runner"}, policy.WithCache(c))
		if err != nil {
			t.Fatal(err)
		}
		return res, c
	}
	if res, c := verify(signed.String()); !res.Verified {
		t.Fatalf("signed: %+v", res)
	} else if h, m := c.Stats(); h != 0 || m != 1 {
		t.Fatalf("first process: hits %d misses %d", h, m)
	}
	if res, c := verify(signed.String()); !res.Verified {
		t.Fatalf("signed, second process: %+v", res)
	} else if h, m := c.Stats(); h != 1 || m != 0 {
		t.Fatalf("second process: hits %d misses %d, want the pass from %s", h, m, dir)
	}
	if res, _ := verify(unsigned.String()); res.Verified {
		t.Fatalf("unsigned: %+v", res)
	}
	if res, c := verify(unsigned.String()); res.Verified {
		t.Fatalf("unsigned, second process: %+v", res)
	} else if h, m := c.Stats(); h != 0 || m != 1 {
		t.Fatalf("a refusal was kept on disk: hits %d misses %d", h, m)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("cache dir: %v %v", fi.Mode(), err)
	}
}

// Callers verifying the same target at once through one cache verify it
// once: the others wait for that result (render verifies a pool's
// generations side by side, and they share their runner image).
func TestCacheVerifiesOnceForConcurrentCallers(t *testing.T) {
	f := newFixture(t)
	p := f.policy("  rules:\n    - name: any\n      signatures:\n        keys: [release]\n", false)
	d := f.push("runners/agent")
	f.publish(d, f.release, builder, buildType, false)
	c := policy.NewCache()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := p.Verify(ctx, policy.Target{Ref: d.String(), Kind: "runner"}, policy.WithCache(c))
			if err == nil && !res.Verified {
				err = fmt.Errorf("not verified: %+v", res.Failed())
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if h, m := c.Stats(); h != 7 || m != 1 || c.Len() != 1 {
		t.Fatalf("8 concurrent callers: hits %d misses %d len %d, want one verification", h, m, c.Len())
	}
}
