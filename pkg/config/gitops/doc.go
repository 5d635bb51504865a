// Package gitops writes to a config git repository safely under concurrent
// writers, with go-git and no git CLI.
//
// Open names a remote (a local path, file://, http(s):// with a token or
// basic auth from the environment, ssh://). Update fetches the branch head
// (depth 1 by default, into memory or a cache folder; a store that already
// holds an earlier head, a cache folder or a retry, fetches only the commits
// since), runs an Edit on that head's tree, builds the new trees in the
// object store (only the trees on the changed paths are written: no
// worktree, no status over the whole repository), commits with an author, a
// message and trailers, and pushes the objects the edit wrote with a
// compare-and-swap on the branch, never forcing. Nothing walks the whole
// tree, so an update costs what the edit touches, not what the repository
// holds, apart from the first fetch.
//
// When the push loses a race (another writer moved the branch), Update
// fetches again and re-applies the Edit to the new head, retrying with
// exponential backoff and jitter up to a bound. The Edit decides what a real
// conflict is (for example a newer generation already promoted) by
// returning an error wrapping ErrConflict, which stops the retries. An Edit
// that changes nothing makes no commit (Unchanged). Writers sharing a cache
// folder in one process are serialised; writers with their own store race
// like separate processes do, through the push.
//
// A push whose answer is lost (the connection cut, the writer killed) is
// recognised on the next look at the remote: if the branch holds the commit,
// the update landed. Credentials never appear in errors.
package gitops
