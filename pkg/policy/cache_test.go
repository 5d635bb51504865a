package policy_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/slipway-dev/slipway/pkg/policy"
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
