package gitops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// ErrStopLog, returned by a Log callback, ends the walk without an error.
var ErrStopLog = errors.New("gitops: stop the log")

// LogEntry is one commit of a branch's history.
type LogEntry struct {
	Commit string
	// Time is the committer's time.
	Time    time.Time
	Subject string
	Body    string
	// Trailers are the message's trailers ("Slipway-Step: warm"), in order.
	Trailers []Trailer

	repo *Repo
	tree plumbing.Hash
}

// Trailer returns the value of the last trailer named key ("" if none).
func (e *LogEntry) Trailer(key string) string {
	v := ""
	for _, t := range e.Trailers {
		if strings.EqualFold(t.Key, key) {
			v = t.Value
		}
	}
	return v
}

// Tree is the commit's tree, read-only.
func (e *LogEntry) Tree() (*Tree, error) {
	tr, err := object.GetTree(e.repo.repo.Storer, e.tree)
	if err != nil {
		return nil, fmt.Errorf("gitops: %s: read tree of %s: %w", e.repo.display, e.Commit, err)
	}
	return newTree(e.repo.repo.Storer, tr), nil
}

// Log fetches branch and calls fn for each commit from its head back
// along first parents, newest first, until fn returns ErrStopLog, the
// history ends, or the store's history does: a shallow store (the default
// depth 1) holds only the head, so open the repository WithDepth(0) to
// read the whole history. A branch that does not exist has no commits.
func (r *Repo) Log(ctx context.Context, branch string, fn func(*LogEntry) error) error {
	head, err := r.fetch(ctx, branch)
	if err != nil || head.IsZero() {
		return err
	}
	h := head
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		c, err := object.GetCommit(r.repo.Storer, h)
		if errors.Is(err, plumbing.ErrObjectNotFound) && h != head {
			return nil // the store's history ends here (shallow)
		}
		if err != nil {
			return fmt.Errorf("gitops: %s: read %s: %w", r.display, h, err)
		}
		e := &LogEntry{Commit: c.Hash.String(), Time: c.Committer.When, repo: r, tree: c.TreeHash}
		e.Subject, e.Body, e.Trailers = parseMessage(c.Message)
		if err := fn(e); errors.Is(err, ErrStopLog) {
			return nil
		} else if err != nil {
			return err
		}
		if len(c.ParentHashes) == 0 {
			return nil
		}
		h = c.ParentHashes[0]
	}
}

// parseMessage splits a commit message into its subject, body and
// trailers (the last paragraph, when every line of it is "Key: Value").
func parseMessage(msg string) (string, string, []Trailer) {
	msg = strings.TrimSpace(strings.ReplaceAll(msg, "\r\n", "\n"))
	subject, rest, _ := strings.Cut(msg, "\n")
	paras := strings.Split(strings.TrimSpace(rest), "\n\n")
	var trailers []Trailer
	if last := paras[len(paras)-1]; last != "" {
		for _, l := range strings.Split(last, "\n") {
			k, v, ok := strings.Cut(l, ": ")
			if !ok || k == "" || strings.ContainsAny(k, " \t") {
				trailers = nil
				break
			}
			trailers = append(trailers, Trailer{Key: k, Value: strings.TrimSpace(v)})
		}
	}
	if trailers != nil {
		paras = paras[:len(paras)-1]
	}
	return strings.TrimSpace(subject), strings.TrimSpace(strings.Join(paras, "\n\n")), trailers
}
