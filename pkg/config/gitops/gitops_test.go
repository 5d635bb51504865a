package gitops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/testharness/gittest"
)

var author = Signature{Name: "Release Bot", Email: "bot@example.invalid"}

// setFile is an edit writing one file, with a commit naming it.
func setFile(path, content string) Edit {
	return func(t *Tree) (*Commit, error) {
		if err := t.WriteFile(path, []byte(content)); err != nil {
			return nil, err
		}
		return &Commit{Subject: "set " + path, Body: "content: " + content,
			Trailers: []Trailer{{"Slipway-Pool", "agents"}, {"Slipway-Step", "test"}}}, nil
	}
}

func TestUpdateOverHTTP(t *testing.T) {
	s := gittest.NewServer(t)
	url := s.Seed(t, "config.git", "main", map[string]string{
		"README.md":           "config\n",
		"pools/a/pool.yaml":   "kind: Pool\n",
		"pools/b/desired.yml": "x\n",
	})
	ctx := context.Background()
	r, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Update(ctx, Request{Branch: "main", Author: author, Edit: setFile("pools/a/generations/g-1.yaml", "id: g-1\n")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != Committed || res.Attempts != 1 || len(res.Changed) != 1 {
		t.Fatalf("result %+v", res)
	}
	dir := s.Dir("config.git")
	if head := gittest.Git(t, dir, "rev-parse", "main"); head != res.Commit {
		t.Fatalf("remote main = %s, want %s", head, res.Commit)
	}
	gittest.Git(t, dir, "fsck", "--strict", "--no-dangling")
	if got := gittest.Git(t, dir, "show", "main:pools/a/generations/g-1.yaml"); got != "id: g-1" {
		t.Errorf("file = %q", got)
	}
	// The other files are kept, the log names the author and the trailers
	// parse as git trailers.
	if got := gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "main"); got != "README.md\npools/a/generations/g-1.yaml\npools/a/pool.yaml\npools/b/desired.yml" {
		t.Errorf("tree:\n%s", got)
	}
	if got := gittest.Git(t, dir, "log", "-1", "--format=%an <%ae>|%s", "main"); got != "Release Bot <bot@example.invalid>|set pools/a/generations/g-1.yaml" {
		t.Errorf("log: %s", got)
	}
	if got := gittest.Git(t, dir, "log", "-1", "--format=%(trailers:key=Slipway-Pool,valueonly)", "main"); got != "agents" {
		t.Errorf("trailer Slipway-Pool = %q", got)
	}

	// The same edit again: no commit, no push.
	pushes := s.Pushes()
	again, err := r.Update(ctx, Request{Branch: "main", Author: author, Edit: setFile("pools/a/generations/g-1.yaml", "id: g-1\n")})
	if err != nil || again.Status != Unchanged || again.Commit != res.Commit {
		t.Fatalf("repeat: %+v, %v", again, err)
	}
	if s.Pushes() != pushes {
		t.Error("an unchanged update pushed")
	}

	// Remove a file: its folder disappears with it.
	res, err = r.Update(ctx, Request{Branch: "main", Author: author, Edit: func(tr *Tree) (*Commit, error) {
		return &Commit{Subject: "drop b"}, tr.Remove("pools/b/desired.yml")
	}})
	if err != nil || res.Status != Committed {
		t.Fatal(res, err)
	}
	if got := gittest.Git(t, dir, "ls-tree", "--name-only", "main:pools"); got != "a" {
		t.Errorf("pools after removing b's only file: %q", got)
	}
	gittest.Git(t, dir, "fsck", "--strict", "--no-dangling")
}

func TestFirstCommitIntoEmptyRepo(t *testing.T) {
	s := gittest.NewServer(t)
	url := s.InitBare(t, "empty.git", "main")
	ctx := context.Background()
	r, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Update(ctx, Request{Branch: "main", Author: author, Edit: setFile("pools/a/pool.yaml", "kind: Pool\n")})
	if err != nil || res.Status != Committed || res.Parent != "" {
		t.Fatalf("%+v, %v", res, err)
	}
	dir := s.Dir("empty.git")
	gittest.Git(t, dir, "fsck", "--strict")
	if n := gittest.Git(t, dir, "rev-list", "--count", "main"); n != "1" {
		t.Errorf("commits = %s", n)
	}
}

// TestConcurrentWriters races 10 writers (each with its own store, as
// separate processes are) over HTTP into one branch. Each appends its own line to a
// shared file (read-modify-write) and adds its own file. Every line and file
// must land exactly once, and the history must stay linear.
func TestConcurrentWriters(t *testing.T) {
	s := gittest.NewServer(t)
	url := s.Seed(t, "config.git", "main", map[string]string{"log.txt": ""})
	ctx := context.Background()
	const n = 10
	var wg sync.WaitGroup
	errs := make([]error, n)
	attempts := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := Open(ctx, url, WithRetry(30, 20*time.Millisecond))
			if err != nil {
				errs[i] = err
				return
			}
			line := fmt.Sprintf("writer %d\n", i)
			res, err := r.Update(ctx, Request{Branch: "main", Author: author, Edit: func(tr *Tree) (*Commit, error) {
				b, err := tr.ReadFile("log.txt")
				if err != nil {
					return nil, err
				}
				if err := tr.WriteFile("log.txt", append(b, line...)); err != nil {
					return nil, err
				}
				return &Commit{Subject: strings.TrimSpace(line)}, tr.WriteFile(fmt.Sprintf("w/%d", i), []byte(line))
			}})
			errs[i] = err
			if res != nil {
				attempts[i] = res.Attempts
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	dir := s.Dir("config.git")
	gittest.Git(t, dir, "fsck", "--strict", "--no-dangling")
	log := gittest.Git(t, dir, "show", "main:log.txt")
	for i := range n {
		if c := strings.Count(log+"\n", fmt.Sprintf("writer %d\n", i)); c != 1 {
			t.Errorf("writer %d's line appears %d times in\n%s", i, c, log)
		}
	}
	if got := gittest.Git(t, dir, "rev-list", "--count", "main"); got != fmt.Sprint(n+1) {
		t.Errorf("commits = %s, want %d", got, n+1)
	}
	if merges := gittest.Git(t, dir, "rev-list", "--merges", "main"); merges != "" {
		t.Errorf("history is not linear: merges %s", merges)
	}
	t.Logf("attempts per writer: %v", attempts)
}

// TestConflictStops: an edit that finds a newer state returns ErrConflict;
// Update stops without retrying and writes nothing.
func TestConflictStops(t *testing.T) {
	s := gittest.NewServer(t)
	url := s.Seed(t, "config.git", "main", map[string]string{"seq": "5"})
	ctx := context.Background()
	r, _ := Open(ctx, url)
	calls := 0
	_, err := r.Update(ctx, Request{Branch: "main", Author: author, Edit: func(tr *Tree) (*Commit, error) {
		calls++
		b, _ := tr.ReadFile("seq")
		if string(b) >= "4" {
			return nil, fmt.Errorf("%w: sequence %s already promoted", ErrConflict, b)
		}
		return &Commit{Subject: "x"}, tr.WriteFile("seq", []byte("4"))
	}})
	if !errors.Is(err, ErrConflict) || calls != 1 || !strings.Contains(err.Error(), "sequence 5") {
		t.Fatalf("err = %v after %d calls", err, calls)
	}
	if s.Pushes() != 0 {
		t.Error("a refused edit pushed")
	}
}

func TestRemoteFaults(t *testing.T) {
	s := gittest.NewServer(t)
	url := s.Seed(t, "config.git", "main", map[string]string{"a": "1"})
	ctx := context.Background()

	t.Run("read-only", func(t *testing.T) {
		s.ReadOnly("config.git", true)
		defer s.ReadOnly("config.git", false)
		r, _ := Open(ctx, url, WithRetry(2, time.Millisecond))
		_, err := r.Update(ctx, Request{Branch: "main", Author: author, Edit: setFile("b", "2")})
		if !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "config.git") {
			t.Fatalf("err = %v, want ErrRemote naming the repository", err)
		}
	})
	t.Run("unreachable, credentials redacted", func(t *testing.T) {
		r, err := Open(ctx, "http://bot:s3cr3t-token@127.0.0.1:1/config.git", WithRetry(2, time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Update(ctx, Request{Branch: "main", Author: author, Edit: setFile("b", "2")})
		if !errors.Is(err, ErrRemote) || strings.Contains(err.Error(), "s3cr3t-token") || !strings.Contains(err.Error(), "127.0.0.1:1/config.git") {
			t.Fatalf("err = %v", err)
		}
		if strings.Contains(r.URL(), "s3cr3t") {
			t.Errorf("URL() = %s", r.URL())
		}
	})
	t.Run("no such repository", func(t *testing.T) {
		r, _ := Open(ctx, s.URL("absent.git"), WithRetry(2, time.Millisecond))
		_, err := r.Update(ctx, Request{Branch: "main", Author: author, Edit: setFile("b", "2")})
		if !errors.Is(err, ErrRemote) {
			t.Fatalf("err = %v", err)
		}
	})
	gittest.Git(t, s.Dir("config.git"), "fsck", "--strict")
}

// TestKilledMidPush abandons a push while the server holds it (the writer
// "dies"), then runs the update again: it lands once, nothing is corrupt.
func TestKilledMidPush(t *testing.T) {
	s := gittest.NewServer(t)
	url := s.Seed(t, "config.git", "main", map[string]string{"a": "1"})
	held := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	s.BeforeReceivePack(func() bool {
		once.Do(func() { close(held) })
		<-release
		return false // the writer died: its push never reaches git
	})
	ctx, cancel := context.WithCancel(context.Background())
	r, _ := Open(ctx, url)
	done := make(chan error, 1)
	go func() {
		_, err := r.Update(ctx, Request{Branch: "main", Author: author, Edit: setFile("gen", "g-1")})
		done <- err
	}()
	<-held
	cancel() // the writer dies mid-push
	if err := <-done; err == nil {
		t.Fatal("a cancelled push reported success")
	}
	close(release)
	s.BeforeReceivePack(nil)

	ctx = context.Background()
	r2, _ := Open(ctx, url)
	res, err := r2.Update(ctx, Request{Branch: "main", Author: author, Edit: setFile("gen", "g-1")})
	if err != nil {
		t.Fatal(err)
	}
	dir := s.Dir("config.git")
	gittest.Git(t, dir, "fsck", "--strict")
	if got := gittest.Git(t, dir, "show", "main:gen"); got != "g-1" {
		t.Errorf("gen = %q", got)
	}
	if n := gittest.Git(t, dir, "rev-list", "--count", "main"); n != "2" {
		t.Errorf("commits = %s, want 2 (seed + one landing); result %+v", n, res)
	}
}

func TestPushBranch(t *testing.T) {
	s := gittest.NewServer(t)
	url := s.Seed(t, "config.git", "main", map[string]string{"a": "1"})
	ctx := context.Background()
	r, _ := Open(ctx, url)
	main := gittest.Git(t, s.Dir("config.git"), "rev-parse", "main")
	res, err := r.Update(ctx, Request{Branch: "main", PushBranch: "promote/g-1", Author: author, Edit: setFile("gen", "g-1")})
	if err != nil || res.Branch != "promote/g-1" {
		t.Fatal(res, err)
	}
	dir := s.Dir("config.git")
	if got := gittest.Git(t, dir, "rev-parse", "main"); got != main {
		t.Error("main moved")
	}
	if got := gittest.Git(t, dir, "rev-parse", "promote/g-1^"); got != main {
		t.Errorf("review branch parent %s, want main %s", got, main)
	}
	if _, err := r.Update(ctx, Request{Branch: "main", PushBranch: "bad..name", Edit: setFile("x", "y")}); err == nil {
		t.Error("bad branch name accepted")
	}
}

func TestTreeEdits(t *testing.T) {
	s := gittest.NewServer(t)
	url := s.Seed(t, "config.git", "main", map[string]string{"a/b": "1", "a/c": "2", "x": "3"})
	ctx := context.Background()
	r, _ := Open(ctx, url)
	_, err := r.Update(ctx, Request{Branch: "main", Author: author, Edit: func(tr *Tree) (*Commit, error) {
		if got, _ := tr.List("a"); strings.Join(got, ",") != "b,c" {
			t.Errorf("List(a) = %v", got)
		}
		tr.Remove("a/b")
		tr.WriteFile("a/d/e", []byte("4"))
		if got, _ := tr.List("a"); strings.Join(got, ",") != "c,d" {
			t.Errorf("List(a) after edits = %v", got)
		}
		if _, err := tr.ReadFile("a/b"); !errors.Is(err, ErrNotExist) {
			t.Errorf("removed file read: %v", err)
		}
		if err := tr.WriteFile("../escape", nil); err == nil {
			t.Error("path escaping the repo accepted")
		}
		if err := tr.WriteFile(".git/config", nil); err == nil {
			t.Error(".git path accepted")
		}
		return &Commit{Subject: "edits"}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	// A file in the way of a folder is an error, not a silent replacement.
	_, err = r.Update(ctx, Request{Branch: "main", Author: author, Edit: setFile("x/y", "5")})
	if err == nil || !strings.Contains(err.Error(), "x is a file") {
		t.Fatalf("file in the way: %v", err)
	}
	gittest.Git(t, s.Dir("config.git"), "fsck", "--strict")
	if got := gittest.Git(t, s.Dir("config.git"), "ls-tree", "-r", "--name-only", "main"); got != "a/c\na/d/e\nx" {
		t.Errorf("tree:\n%s", got)
	}
}

// TestContains: a reader at a later commit has seen an earlier one, not
// the other way round; a commit this store has not fetched yet (pushed by
// another writer) is fetched first.
func TestContains(t *testing.T) {
	s := gittest.NewServer(t)
	url := s.Seed(t, "config.git", "main", map[string]string{"README.md": "config\n"})
	ctx := context.Background()
	r, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	first, err := r.Update(ctx, Request{Branch: "main", Author: author, Edit: setFile("a", "1")})
	if err != nil {
		t.Fatal(err)
	}
	other, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	second, err := other.Update(ctx, Request{Branch: "main", Author: author, Edit: setFile("a", "2")})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := r.Contains(ctx, "main", second.Commit, first.Commit); err != nil || !ok {
		t.Errorf("second contains first: %v %v", ok, err)
	}
	if ok, err := r.Contains(ctx, "main", first.Commit, second.Commit); err != nil || ok {
		t.Errorf("first contains second: %v %v", ok, err)
	}
	if ok, err := r.Contains(ctx, "main", first.Commit, first.Commit); err != nil || !ok {
		t.Errorf("a commit contains itself: %v %v", ok, err)
	}
	if _, err := r.Contains(ctx, "main", "main", first.Commit); err == nil {
		t.Error("a branch name was taken for a commit id")
	}
}
