package control

import "sync"

// groupCommit gathers concurrent work into group commits: work queued
// when no commit runs is committed at once by its caller; work arriving
// while one commits queues up, and when that commit is done the first of
// it commits all that waits (up to a bound), and so on. Each caller gets
// its own outcome; work commits in the order it was queued. The store
// uses it three times (store.go): submissions (one multi-row insert and one
// admission pass), stream appends (one statement per group), and on SQLite
// the write transactions themselves (one fsync).
type groupCommit[I, O any] struct {
	mu      sync.Mutex
	waiting []*member[I, O]
	leading bool
}

// member is one caller's work in a groupCommit.
type member[I, O any] struct {
	in   I
	out  O
	lead bool      // queued with no commit running: its caller commits
	done chan bool // buffered (1): false once out is set, true to lead
}

// enqueue queues in. The caller then awaits its member (enqueue may be
// called under the caller's own lock, which keeps its work in order).
func (q *groupCommit[I, O]) enqueue(in I) *member[I, O] {
	m := &member[I, O]{in: in, done: make(chan bool, 1)}
	q.mu.Lock()
	q.waiting = append(q.waiting, m)
	m.lead = !q.leading
	q.leading = true
	q.mu.Unlock()
	return m
}

// await returns m's outcome. While m's caller leads it commits batches of
// at most max members with commit, which sets each member's out; it hands
// the lead on once m's own batch is committed.
func (q *groupCommit[I, O]) await(m *member[I, O], max int, commit func([]*member[I, O])) O {
	if !m.lead && !<-m.done {
		return m.out
	}
	for {
		q.mu.Lock()
		batch := q.waiting[:min(len(q.waiting), max)]
		q.waiting = q.waiting[len(batch):]
		q.mu.Unlock()
		commit(batch)
		mine := false
		for _, b := range batch {
			if b == m {
				mine = true
				continue
			}
			b.done <- false
		}
		q.mu.Lock()
		if len(q.waiting) == 0 {
			q.leading = false
			q.mu.Unlock()
			return m.out
		}
		if !mine {
			q.mu.Unlock()
			continue // m still waits: commit the next batch
		}
		next := q.waiting[0]
		q.mu.Unlock()
		next.done <- true
		return m.out
	}
}
