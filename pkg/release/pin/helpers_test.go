package pin

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/resolve"
)

// dg is a readable test digest: sha256:000…0n.
func dg(n int) string { return fmt.Sprintf("sha256:%064x", n) }

// testTable is the digest each tag resolves to in these tests.
func testTable() map[string]string {
	return map[string]string{
		"nginx:1.25":   dg(1),
		"busybox:1.36": dg(2),
		"alpine:3.20":  dg(3),
		"registry.example.com:5000/team/migrate:v7":       dg(4),
		"ghcr.io/example/sidecar:latest":                  dg(5),
		"postgres:16":                                     dg(6),
		"fluent/fluent-bit:3.0":                           dg(7),
		"redis:7":                                         dg(8),
		"python:3.12-slim":                                dg(10),
		"golang:1.26":                                     dg(11),
		"registry.example.com:5000/mirror/postgres:16":    dg(12),
		"ghcr.io/example/alpine:3.20":                     dg(13),
		"base-image:v1":                                   dg(14),
		"nginx:latest":                                    dg(15),
		"nginx-exporter:1":                                dg(16),
		"registry.example.com:5000/platform/runner:0.9.1": dg(17),
	}
}

// tableResolver is a resolve.Func backed by a table of tag to digest. It
// records how often each reference was asked for; a reference missing from
// the table is resolve.ErrNotFound.
type tableResolver struct {
	mu     sync.Mutex
	table  map[string]string // canonical reference to digest
	asked  map[string]int
	failed map[string]error // canonical reference to the error to answer
}

func newTableResolver(t testing.TB, table map[string]string) *tableResolver {
	t.Helper()
	tr := &tableResolver{table: map[string]string{}, asked: map[string]int{}, failed: map[string]error{}}
	for k, d := range table {
		r, err := ref.Parse(k)
		if err != nil {
			t.Fatal(err)
		}
		tr.table[r.Canonical()] = d
	}
	return tr
}

func (tr *tableResolver) resolver() resolve.Resolver {
	return resolve.Func(func(ctx context.Context, r ref.Reference) (ref.Pin, error) {
		if r.IsPinned() {
			return ref.PinOf(r, r.Digest(), ref.Origin{Source: ref.SourceWritten}), nil
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		tr.asked[r.String()]++
		if err := tr.failed[r.Canonical()]; err != nil {
			return ref.Pin{}, err
		}
		d, ok := tr.table[r.Canonical()]
		if !ok {
			return ref.Pin{}, fmt.Errorf("%w: %s", resolve.ErrNotFound, r.Canonical())
		}
		return ref.PinOf(r, d, ref.Origin{Source: ref.SourceRegistry, Registry: r.Registry()}), nil
	})
}

func (tr *tableResolver) calls() map[string]int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := map[string]int{}
	for k, v := range tr.asked {
		out[k] = v
	}
	return out
}

// writeFiles writes name→content under dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree reads every regular file under dir, by slash path relative to dir.
func readTree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// copyTree copies the regular files under src to dst.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	files := readTree(t, src)
	for name, content := range files {
		writeFiles(t, dst, map[string]string{filepath.FromSlash(name): content})
	}
}

// pinTree runs Find, Plan and Write over dir.
func pinTree(t testing.TB, dir string, r resolve.Resolver, find []Option, plan ...PlanOption) (*Result, error) {
	t.Helper()
	tree, err := Find(context.Background(), []string{dir}, find...)
	if err != nil {
		return nil, err
	}
	res, err := Plan(context.Background(), tree, r, plan...)
	if err != nil {
		return nil, err
	}
	sameAsCheckAll(t, tree, r, res, plan...)
	return res, res.Write()
}

// sameAsCheckAll plans tree again with every rewritten file parsed and
// checked, and expects the same files: an in-place splice Plan does not
// check keeps the structure, as the check would have found.
func sameAsCheckAll(t testing.TB, tree *Tree, r resolve.Resolver, res *Result, plan ...PlanOption) {
	t.Helper()
	checked, err := Plan(context.Background(), tree, r, append(slices.Clone(plan), withCheckAll())...)
	if err != nil {
		t.Fatalf("plan without the check passed, with it: %v", err)
	}
	if len(checked.Files) != len(res.Files) {
		t.Fatalf("%d files planned with the check, %d without", len(checked.Files), len(res.Files))
	}
	for i, f := range res.Files {
		if c := checked.Files[i]; c.Status != f.Status || !bytes.Equal(c.Data, f.Data) {
			t.Fatalf("%s: %s with the check, %s without; or the bytes differ", f.Path, c.Status, f.Status)
		}
	}
}
