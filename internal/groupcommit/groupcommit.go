package groupcommit

import "sync"

// Queue is a group commit of work I with outcome O. The zero Queue is
// ready.
type Queue[I, O any] struct {
	mu      sync.Mutex
	waiting []*Member[I, O]
	leading bool
}

// Member is one caller's work in a Queue: commit reads In and sets Out.
type Member[I, O any] struct {
	In   I
	Out  O
	lead bool      // queued with no commit running: its caller commits
	done chan bool // buffered (1): false once Out is set, true to lead
}

// Enqueue queues in. The caller then awaits its member (Enqueue may be
// called under the caller's own lock, which keeps its work in order).
func (q *Queue[I, O]) Enqueue(in I) *Member[I, O] {
	m := &Member[I, O]{In: in, done: make(chan bool, 1)}
	q.mu.Lock()
	q.waiting = append(q.waiting, m)
	m.lead = !q.leading
	q.leading = true
	q.mu.Unlock()
	return m
}

// Await returns m's outcome. While m's caller leads it commits batches of
// at most max members (max <= 0: all that wait) with commit, which must
// set each member's Out; it hands the lead on once m's own batch is
// committed. Await waits for m's commit whatever happens to its caller's
// context: commit decides what a canceled caller gets.
func (q *Queue[I, O]) Await(m *Member[I, O], max int, commit func([]*Member[I, O])) O {
	if !m.lead && !<-m.done {
		return m.Out
	}
	for {
		q.mu.Lock()
		n := len(q.waiting)
		if max > 0 {
			n = min(n, max)
		}
		batch := q.waiting[:n:n]
		q.waiting = q.waiting[n:]
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
			return m.Out
		}
		if !mine {
			q.mu.Unlock()
			continue // m still waits: commit the next batch
		}
		next := q.waiting[0]
		q.mu.Unlock()
		next.done <- true
		return m.Out
	}
}

// Waiting is how many members wait for a commit (for tests and metrics).
func (q *Queue[I, O]) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}
