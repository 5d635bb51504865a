package gitops

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Errors.
var (
	// ErrConflict is what an edit returns (wrapped) when the repository's
	// state forbids the change, e.g. another writer promoted a newer
	// generation. Update stops at once and returns it: it is not retried.
	ErrConflict = errors.New("gitops: conflict")
	// ErrRetriesExhausted marks an update that kept losing the race for the
	// branch until its attempts ran out.
	ErrRetriesExhausted = errors.New("gitops: retries exhausted")
	// ErrRemote marks a remote that cannot be read or written (unreachable,
	// refused, read-only, authentication).
	ErrRemote = errors.New("gitops: remote")
	// ErrNoRepository marks a repository that is not there: no such local
	// path, or a remote that answers it has no such repository. It is an
	// ErrRemote too when the remote said so.
	ErrNoRepository = errors.New("gitops: no repository")
)

// noRepositoryError is a repository that is not there, in both families.
type noRepositoryError struct {
	msg string
	err error
}

func (e *noRepositoryError) Error() string   { return e.msg }
func (e *noRepositoryError) Unwrap() []error { return []error{ErrNoRepository, ErrRemote, e.err} }

// Status says what Update did.
type Status string

const (
	// Committed: a commit was pushed.
	Committed Status = "committed"
	// Unchanged: the edit changed nothing; nothing was committed or pushed.
	Unchanged Status = "unchanged"
)

// Signature is a commit author.
type Signature struct {
	Name, Email string
}

// Trailer is a "Key: Value" line at the end of a commit message.
type Trailer struct {
	Key, Value string
}

// Commit describes the commit an edit wants.
type Commit struct {
	// Subject is the message's first line.
	Subject string
	// Body follows a blank line (optional).
	Body string
	// Trailers end the message ("Slipway-Pool: agents").
	Trailers []Trailer
}

// Message renders the full commit message.
func (c *Commit) Message() string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(c.Subject))
	b.WriteString("\n")
	if body := strings.TrimSpace(c.Body); body != "" {
		b.WriteString("\n" + body + "\n")
	}
	if len(c.Trailers) > 0 {
		b.WriteString("\n")
		for _, t := range c.Trailers {
			fmt.Fprintf(&b, "%s: %s\n", t.Key, t.Value)
		}
	}
	return b.String()
}

// Edit changes a tree and describes the commit. It may run several times
// (once per attempt, on the newest head each time), so it must derive
// everything from the tree it is given. Returning an error wrapping
// ErrConflict stops the update.
type Edit func(t *Tree) (*Commit, error)

// Request is one update of a branch.
type Request struct {
	// Branch is the branch read and, unless PushBranch is set, written.
	Branch string
	// PushBranch, if set, receives the commit instead of Branch (a review
	// branch); it must be new or a fast-forward.
	PushBranch string
	// Author signs the commit (also as committer).
	Author Signature
	// Edit makes the change.
	Edit Edit
}

// Result reports an update.
type Result struct {
	Status Status `json:"status"`
	// Commit is the new commit (or the unchanged head).
	Commit string `json:"commit"`
	// Parent is the commit the edit was applied to ("" for a first commit).
	Parent string `json:"parent,omitempty"`
	// Branch is where the commit was pushed.
	Branch string `json:"branch"`
	// Attempts counts fetch-edit-push rounds (more than 1 after a race).
	Attempts int `json:"attempts"`
	// Changed lists the paths the edit wrote or removed.
	Changed []string `json:"changed,omitempty"`
	// Message is the commit message.
	Message string `json:"message,omitempty"`
}

// Repo is a config repository: a remote and a local object store (in
// memory, or a bare clone in a cache folder kept between runs). A Repo and
// the Trees it returns are for one goroutine at a time (go-git's object
// stores are not safe for concurrent use); concurrent writers each open
// their own, as writers in other processes do, and push, re-read and retry
// settles their races.
type Repo struct {
	url     string
	display string
	repo    *git.Repository
	o       options
}

// Open prepares the repository at rawURL: a local path, file://,
// http(s)://, or ssh:// (and scp-like user@host:path). Nothing is fetched
// until Update. Credentials never appear in errors.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Repo, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	u, display, err := normaliseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if o.auth == nil {
		if o.tokenFile, o.tokenUser = tokenFileFromEnv(u); o.tokenFile == "" {
			if o.auth, err = authFromEnv(u); err != nil {
				return nil, err
			}
		}
	}
	var repo *git.Repository
	if o.cacheDir != "" {
		repo, err = openCache(o.cacheDir, u)
	} else {
		repo, err = git.Init(memory.NewStorage(), nil)
		if err == nil {
			_, err = repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{u}})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("gitops: open %s: %w", display, err)
	}
	return &Repo{url: u, display: display, repo: repo, o: o}, nil
}

// URL is the remote's address without credentials.
func (r *Repo) URL() string { return r.display }

func openCache(dir, u string) (*git.Repository, error) {
	repo, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		repo, err = git.PlainInit(dir, true)
		if err != nil {
			return nil, err
		}
		_, err = repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{u}})
		return repo, err
	}
	if err != nil {
		return nil, err
	}
	rem, err := repo.Remote("origin")
	if err != nil {
		return nil, err
	}
	if got := rem.Config().URLs; len(got) != 1 || got[0] != u {
		return nil, fmt.Errorf("cache %s belongs to another remote", dir)
	}
	return repo, nil
}

// normaliseURL turns a local path into file:// and returns the URL to use
// and one safe to print (no user info).
func normaliseURL(raw string) (use, display string, err error) {
	if raw == "" {
		return "", "", fmt.Errorf("gitops: no repository given")
	}
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			return "", "", fmt.Errorf("gitops: repository URL: %w", redact(err, raw))
		}
		switch u.Scheme {
		case "file", "http", "https", "ssh", "git":
		default:
			return "", "", fmt.Errorf("gitops: repository URL scheme %q not supported (file, http, https, ssh, git)", u.Scheme)
		}
		d := *u
		d.User = nil
		return raw, d.String(), nil
	}
	if isSCPLike(raw) {
		return raw, raw, nil
	}
	abs, err := filepath.Abs(raw)
	if err != nil {
		return "", "", err
	}
	if _, err := os.Stat(abs); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is named once
		}
		if errors.Is(err, fs.ErrNotExist) {
			return "", "", fmt.Errorf("%w at %s: %w", ErrNoRepository, raw, err)
		}
		return "", "", fmt.Errorf("gitops: repository %s: %w", raw, err)
	}
	return "file://" + abs, abs, nil
}

// isSCPLike recognises "user@host:path" (ssh without a scheme).
func isSCPLike(s string) bool {
	at, colon := strings.Index(s, "@"), strings.Index(s, ":")
	return at > 0 && colon > at && !strings.Contains(s[:colon], "/")
}

// redact removes rawURL's user info from err's message.
func redact(err error, rawURL string) error {
	if err == nil {
		return nil
	}
	u, perr := url.Parse(rawURL)
	if perr != nil || u.User == nil {
		return err
	}
	msg := err.Error()
	if pw, ok := u.User.Password(); ok && pw != "" {
		msg = strings.ReplaceAll(msg, pw, "REDACTED")
	}
	msg = strings.ReplaceAll(msg, u.User.String()+"@", "")
	return errors.New(msg)
}

// cacheLocks serialises updates through one cache folder within this
// process: its object store and refs are shared. Writers with their own
// (in-memory) store are independent, like writers in other processes, and
// are handled by push, re-read and retry.
var cacheLocks sync.Map // string -> *sync.Mutex

func lockCache(key string) func() {
	m, _ := cacheLocks.LoadOrStore(key, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Update fetches req.Branch, applies req.Edit to its head, commits, and
// pushes, never forcing. When the push loses a race (the branch moved), it
// fetches again, re-applies the edit to the new head and retries, with
// exponential backoff and jitter, up to the configured number of attempts.
// An edit returning ErrConflict stops it. An edit that changes nothing makes
// no commit and returns Unchanged.
func (r *Repo) Update(ctx context.Context, req Request) (*Result, error) {
	if req.Branch == "" || req.Edit == nil {
		return nil, fmt.Errorf("gitops: update needs a branch and an edit")
	}
	for _, b := range []string{req.Branch, req.PushBranch} {
		if b != "" && !plumbing.NewBranchReferenceName(b).IsBranch() || strings.ContainsAny(b, " ~^:?*[\\") || strings.Contains(b, "..") {
			return nil, fmt.Errorf("gitops: bad branch name %q", b)
		}
	}
	push := req.PushBranch
	if push == "" {
		push = req.Branch
	}
	if r.o.cacheDir != "" {
		abs, err := filepath.Abs(r.o.cacheDir)
		if err != nil {
			return nil, err
		}
		unlock := lockCache(abs)
		defer unlock()
	}
	var lastErr error
	for attempt := 1; attempt <= r.o.attempts; attempt++ {
		if attempt > 1 {
			if err := sleep(ctx, r.backoff(attempt)); err != nil {
				return nil, fmt.Errorf("gitops: %s: %w (after: %v)", r.display, err, lastErr)
			}
		}
		res, retry, err := r.attempt(ctx, req, push)
		if err == nil {
			res.Attempts = attempt
			return res, nil
		}
		if !retry {
			return nil, err
		}
		lastErr = err
	}
	return nil, fmt.Errorf("%w: %s branch %s: %d attempts: %w", ErrRetriesExhausted, r.display, push, r.o.attempts, lastErr)
}

func (r *Repo) backoff(attempt int) time.Duration {
	d := r.o.backoff << min(attempt-2, 10)
	d = min(d, r.o.maxBackoff)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1)) // half fixed, half jitter
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// attempt runs one fetch-edit-commit-push round. retry says whether a
// failure may succeed on a new round.
func (r *Repo) attempt(ctx context.Context, req Request, push string) (*Result, bool, error) {
	base, err := r.fetch(ctx, req.Branch)
	if err != nil {
		return nil, isTransient(err), err
	}
	var baseTree *object.Tree
	var baseCommit *object.Commit
	if !base.IsZero() {
		if baseCommit, err = r.repo.CommitObject(base); err != nil {
			return nil, false, fmt.Errorf("gitops: %s: read %s: %w", r.display, base, err)
		}
		if baseTree, err = baseCommit.Tree(); err != nil {
			return nil, false, fmt.Errorf("gitops: %s: read tree of %s: %w", r.display, base, err)
		}
	}
	t := newTree(r.repo.Storer, baseTree)
	c, err := req.Edit(t)
	if err != nil {
		return nil, false, err
	}
	treeHash, changed, err := t.write()
	if err != nil {
		return nil, false, err
	}
	res := &Result{Branch: push, Changed: t.Changed()}
	if !base.IsZero() {
		res.Parent = base.String()
	}
	if !changed || c == nil {
		res.Status, res.Commit, res.Changed = Unchanged, base.String(), nil
		if push == req.Branch || base.IsZero() {
			return res, false, nil
		}
	}
	var objects []plumbing.Hash // what the remote lacks: the commit and what the edit wrote
	if res.Status != Unchanged {
		commit, err := r.commit(treeHash, base, c, req.Author)
		if err != nil {
			return nil, false, err
		}
		res.Status, res.Commit, res.Message = Committed, commit.String(), c.Message()
		objects = append([]plumbing.Hash{commit}, t.written...)
	}
	if err := r.push(ctx, plumbing.NewHash(res.Commit), objects, push, req.Branch == push, base); err != nil {
		landed, moved := r.check(ctx, push, plumbing.NewHash(res.Commit), base)
		switch {
		case landed:
			return res, false, nil // the push went through; its answer was lost
		case moved:
			return nil, true, fmt.Errorf("gitops: %s: branch %s moved while pushing: %w", r.display, push, redact(err, r.url))
		default:
			return nil, isTransient(err), fmt.Errorf("%w: %s: push %s: %w", ErrRemote, r.display, push, redact(err, r.url))
		}
	}
	return res, false, nil
}

func (r *Repo) commit(tree, parent plumbing.Hash, c *Commit, author Signature) (plumbing.Hash, error) {
	if author.Name == "" {
		author = r.o.author
	}
	now := r.o.now()
	sig := object.Signature{Name: author.Name, Email: author.Email, When: now}
	co := &object.Commit{Author: sig, Committer: sig, Message: c.Message(), TreeHash: tree}
	if !parent.IsZero() {
		co.ParentHashes = []plumbing.Hash{parent}
	}
	obj := r.repo.Storer.NewEncodedObject()
	if err := co.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("gitops: encode commit: %w", err)
	}
	return r.repo.Storer.SetEncodedObject(obj)
}

// check lists the remote after a failed push: landed when branch holds
// commit, moved when it holds neither commit nor base.
func (r *Repo) check(ctx context.Context, branch string, commit, base plumbing.Hash) (landed, moved bool) {
	rem, err := r.repo.Remote("origin")
	if err != nil {
		return false, false
	}
	refs, err := rem.ListContext(ctx, &git.ListOptions{Auth: r.auth()})
	if err != nil {
		return false, false
	}
	name := plumbing.NewBranchReferenceName(branch)
	for _, ref := range refs {
		if ref.Name() == name {
			return ref.Hash() == commit, ref.Hash() != base && ref.Hash() != commit
		}
	}
	return false, !base.IsZero() // the branch disappeared (or was never there)
}

// isTransient reports errors worth a new attempt: timeouts, resets, 5xx.
func isTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed) || errors.Is(err, transport.ErrRepositoryNotFound) {
		return false
	}
	msg := err.Error()
	for _, s := range []string{"connection reset", "EOF", "timeout", "502", "503", "504", "500 Internal", "broken pipe", "connection refused"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// Snapshot fetches branch and returns its head's tree, read-only (edits
// made to it are never committed), and the head commit ("" for a branch
// that does not exist yet).
func (r *Repo) Snapshot(ctx context.Context, branch string) (*Tree, string, error) {
	base, err := r.fetch(ctx, branch)
	if err != nil {
		return nil, "", err
	}
	if base.IsZero() {
		return newTree(r.repo.Storer, nil), "", nil
	}
	c, err := r.repo.CommitObject(base)
	if err != nil {
		return nil, "", fmt.Errorf("gitops: %s: read %s: %w", r.display, base, err)
	}
	tr, err := c.Tree()
	if err != nil {
		return nil, "", fmt.Errorf("gitops: %s: read tree of %s: %w", r.display, base, err)
	}
	return newTree(r.repo.Storer, tr), base.String(), nil
}

// SnapshotAt is Snapshot of commit revision (its full id) instead of the
// head: revision must be the head of branch or one of its ancestors. A
// shallow store (the default depth 1) holds only the head: open the
// repository WithDepth(0) to read older revisions.
func (r *Repo) SnapshotAt(ctx context.Context, branch, revision string) (*Tree, string, error) {
	if revision == "" {
		return r.Snapshot(ctx, branch)
	}
	h := plumbing.NewHash(revision)
	if h.IsZero() || h.String() != revision {
		return nil, "", fmt.Errorf("gitops: %q is not a full commit id", revision)
	}
	head, err := r.fetch(ctx, branch)
	if err != nil {
		return nil, "", err
	}
	if head.IsZero() || !r.hasCommit(h) || !r.isAncestor(h, head) {
		return nil, "", fmt.Errorf("gitops: %s: %w: commit %s is not on branch %s", r.display, ErrNotExist, revision, branch)
	}
	c, err := r.repo.CommitObject(h)
	if err != nil {
		return nil, "", fmt.Errorf("gitops: %s: read %s: %w", r.display, h, err)
	}
	tr, err := c.Tree()
	if err != nil {
		return nil, "", fmt.Errorf("gitops: %s: read tree of %s: %w", r.display, h, err)
	}
	return newTree(r.repo.Storer, tr), revision, nil
}

// InitBare creates an empty bare repository at dir whose HEAD names
// branch, for a config repository kept on this machine.
func InitBare(dir, branch string) error {
	if branch == "" {
		branch = "main"
	}
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		return fmt.Errorf("gitops: init %s: %w", dir, err)
	}
	head := plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.NewBranchReferenceName(branch))
	if err := repo.Storer.SetReference(head); err != nil {
		return fmt.Errorf("gitops: init %s: %w", dir, err)
	}
	return nil
}

// Contains reports whether commit is ancestor or one of its descendants on
// branch: whether a reader at commit (a runtime's observed revision) has
// seen ancestor (a step's commit). Branch is fetched first when commit is
// not in the local store yet.
func (r *Repo) Contains(ctx context.Context, branch, commit, ancestor string) (bool, error) {
	c, a := plumbing.NewHash(commit), plumbing.NewHash(ancestor)
	if c.IsZero() || a.IsZero() || c.String() != commit || a.String() != ancestor {
		return false, fmt.Errorf("gitops: %q or %q is not a commit id", commit, ancestor)
	}
	if !r.hasCommit(c) {
		if _, err := r.fetch(ctx, branch); err != nil {
			return false, err
		}
	}
	return r.isAncestor(a, c), nil
}
