package checkpoint_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// Checkpoint a workspace, change it, checkpoint it again (one new layer),
// and restore the second checkpoint, verified, into an empty directory.
func Example() {
	ctx := context.Background()
	tmp, _ := os.MkdirTemp("", "checkpoint-example")
	defer os.RemoveAll(tmp)
	priv, pub, _ := sign.GenerateKeys([]byte("pw"))
	signer, _ := sign.LoadSigner(priv, []byte("pw"))
	verifier, _ := sign.LoadVerifier(pub)

	ws := filepath.Join(tmp, "ws")
	_ = os.MkdirAll(ws, 0o755)
	_ = os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("first\n"), 0o644)
	st, _ := checkpoint.OpenStore(filepath.Join(tmp, "store"))
	meta := checkpoint.Meta{Tenant: "acme", Pool: "py", RunID: "run-1", SandboxID: "sb-1", Generation: "gen-a",
		TemplateID: "sha256:" + fmt.Sprintf("%064x", 1)}

	first, base, err := checkpoint.Create(ctx, st, checkpoint.Source{Dir: ws}, meta, checkpoint.WithSigner(signer))
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = os.WriteFile(filepath.Join(ws, "more.txt"), []byte("second\n"), 0o644)
	second, _, err := checkpoint.Create(ctx, st, checkpoint.Source{Dir: ws}, meta, checkpoint.WithSigner(signer), checkpoint.WithBase(base))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("layers:", first.Predicate.Layers, second.Predicate.Layers, "reused:", second.Predicate.Reused)

	to := filepath.Join(tmp, "restored")
	_, _, _, err = checkpoint.Restore(ctx, st, second.Digest, verifier,
		checkpoint.Expect{Tenant: "acme", Generations: []string{"gen-b", "gen-a"}}, to)
	b, _ := os.ReadFile(filepath.Join(to, "more.txt"))
	fmt.Printf("restored: %v %q\n", err, b)

	_, err = checkpoint.Verify(ctx, st, second.Digest, verifier, checkpoint.Expect{Tenant: "other", Generations: []string{"gen-a"}})
	fmt.Println(err != nil)
	// Output:
	// layers: 1 2 reused: 1
	// restored: <nil> "second\n"
	// true
}
