package gitops

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/slipway-dev/slipway/testharness/gittest"
)

// randomFiles returns n files of size random hex bytes (fixed seed), which
// do not compress: what a pack of them weighs shows how much was sent.
func randomFiles(n, size int) map[string]string {
	rng := rand.New(rand.NewPCG(1, 2))
	files := map[string]string{}
	for i := range n {
		b := make([]byte, size)
		for j := range b {
			b[j] = "0123456789abcdef"[rng.IntN(16)]
		}
		files[fmt.Sprintf("manifests/m-%03d.yaml", i)] = string(b)
	}
	return files
}

// storeBytes is the size of the object files under a bare repository.
func storeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(filepath.Join(dir, "objects"), func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		n += info.Size()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// otherWriter commits a change of one file with the git CLI, as another
// writer would, and returns the new head.
func otherWriter(t *testing.T, url, file, content string) string {
	t.Helper()
	work := t.TempDir()
	gittest.Git(t, "", "clone", "--quiet", "--depth", "1", url, work)
	if err := os.MkdirAll(filepath.Dir(filepath.Join(work, file)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, work, "add", "-A")
	gittest.Git(t, work, "commit", "--quiet", "-m", "other writer: "+file)
	gittest.Git(t, work, "push", "--quiet", "origin", "HEAD:main")
	return gittest.Git(t, work, "rev-parse", "HEAD")
}

// TestCacheFetchesOnlyWhatIsNew: an update through a cache folder that
// holds an older head brings only the commits since then, not the whole
// tree again (go-git's shallow fetch would), and lands on the new head.
func TestCacheFetchesOnlyWhatIsNew(t *testing.T) {
	s := gittest.NewServer(t)
	url := s.Seed(t, "config.git", "main", randomFiles(100, 4096))
	ctx := context.Background()
	cache := filepath.Join(t.TempDir(), "cache")
	r, err := Open(ctx, url, WithCacheDir(cache))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Update(ctx, Request{Branch: "main", Author: author, Edit: setFile("pools/a/target", "g-1")}); err != nil {
		t.Fatal(err)
	}
	before := storeBytes(t, cache)
	if before < 100*4096/2 {
		t.Fatalf("the first fetch stored only %d bytes", before)
	}
	head := otherWriter(t, url, "manifests/m-007.yaml", "changed by another writer\n")

	r, _ = Open(ctx, url, WithCacheDir(cache)) // the next run
	res, err := r.Update(ctx, Request{Branch: "main", Author: author, Edit: setFile("pools/a/target", "g-2")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Parent != head {
		t.Errorf("parent %s, want the other writer's %s", res.Parent, head)
	}
	if grown := storeBytes(t, cache) - before; grown > 16<<10 {
		t.Errorf("the cache grew by %d bytes for a one-file change on a %d-byte tree: the tree was fetched again", grown, before)
	}
	dir := s.Dir("config.git")
	gittest.Git(t, dir, "fsck", "--strict", "--no-dangling")
	if got := gittest.Git(t, dir, "show", "main:manifests/m-007.yaml"); got != "changed by another writer" {
		t.Errorf("the other writer's change is lost: %q", got)
	}
	if got := gittest.Git(t, dir, "show", "main:pools/a/target"); got != "g-2" {
		t.Errorf("target = %q", got)
	}
}

// TestCacheAfterHistoryRewrite: the remote's history was replaced (a
// forced push, the old commits pruned) under a cache holding an old head;
// the next update still reads the new head completely and lands on it.
func TestCacheAfterHistoryRewrite(t *testing.T) {
	s := gittest.NewServer(t)
	url := s.Seed(t, "config.git", "main", map[string]string{"a/old": "1", "keep": "same"})
	ctx := context.Background()
	cache := filepath.Join(t.TempDir(), "cache")
	r, _ := Open(ctx, url, WithCacheDir(cache))
	if _, err := r.Update(ctx, Request{Branch: "main", Author: author, Edit: setFile("a/x", "1")}); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	gittest.Git(t, "", "init", "--quiet", "--initial-branch=main", work)
	for f, body := range map[string]string{"b/new": "2", "keep": "same", "c/d/e": "3"} {
		os.MkdirAll(filepath.Dir(filepath.Join(work, f)), 0o755)
		os.WriteFile(filepath.Join(work, f), []byte(body), 0o644)
	}
	gittest.Git(t, work, "add", "-A")
	gittest.Git(t, work, "commit", "--quiet", "-m", "rewritten")
	dir := s.Dir("config.git")
	gittest.Git(t, work, "push", "--quiet", "--force", dir, "main")
	gittest.Git(t, dir, "reflog", "expire", "--expire=now", "--all")
	gittest.Git(t, dir, "gc", "--quiet", "--prune=now")

	r, _ = Open(ctx, url, WithCacheDir(cache))
	if _, err := r.Update(ctx, Request{Branch: "main", Author: author, Edit: setFile("c/d/f", "4")}); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, dir, "fsck", "--strict", "--no-dangling")
	if got := gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "main"); got != "b/new\nc/d/e\nc/d/f\nkeep" {
		t.Errorf("tree:\n%s", got)
	}
	if n := gittest.Git(t, dir, "rev-list", "--count", "main"); n != "2" {
		t.Errorf("commits = %s, want 2", n)
	}
}

// TestPushSendsWhatTheEditWrote: the push carries only the objects the edit
// made, from a shallow store, including content written twice, content the
// repository already holds elsewhere, new nested folders and an emptied
// folder; the remote accepts it and stays consistent.
func TestPushSendsWhatTheEditWrote(t *testing.T) {
	s := gittest.NewServer(t)
	url := s.Seed(t, "config.git", "main", map[string]string{"a/b": "1", "a/c": "2", "d/e": "same", "x": "3"})
	ctx := context.Background()
	r, _ := Open(ctx, url)
	_, err := r.Update(ctx, Request{Branch: "main", Author: author, Edit: func(tr *Tree) (*Commit, error) {
		tr.WriteFile("p/q/r", []byte("twice"))
		tr.WriteFile("p/s", []byte("twice"))
		tr.WriteFile("f/g", []byte("same"))
		tr.WriteFile("x", []byte("3")) // unchanged content
		tr.Remove("a/b")
		tr.Remove("a/c")
		return &Commit{Subject: "many edits"}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	dir := s.Dir("config.git")
	gittest.Git(t, dir, "fsck", "--strict", "--no-dangling")
	if got := gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "main"); got != "d/e\nf/g\np/q/r\np/s\nx" {
		t.Errorf("tree:\n%s", got)
	}
}
