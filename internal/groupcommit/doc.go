// Package groupcommit gathers concurrent work into group commits, as
// databases with one writer want: work queued when no commit runs is
// committed at once by its own caller; work arriving while one commits
// queues up, and when that commit is done the first of it commits all that
// waits (up to a bound), and so on. One flush then carries many callers'
// work, and a slow flush leaves a queue that drains in one. Each caller
// gets its own outcome; work commits in the order it was queued.
//
// Users: the control plane's store (submissions, stream appends, and on
// SQLite every write transaction, each in a savepoint) and the run
// manifest store's Creates.
//
// It is not a store: it opens no transaction and retries nothing; the
// caller's commit function does the writing and sets every outcome.
package groupcommit
