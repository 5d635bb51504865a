package groupcommit

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// Work queued while a commit runs commits in the next batches, in queue
// order, at most max at a time, each member once with its own outcome.
func TestQueueGroupsInOrder(t *testing.T) {
	var q Queue[int, int]
	var mu sync.Mutex
	var committed [][]int
	inside, release := make(chan struct{}), make(chan struct{})
	commit := func(batch []*Member[int, int]) {
		var ins []int
		for _, m := range batch {
			ins = append(ins, m.In)
			m.Out = m.In * 10
		}
		mu.Lock()
		committed = append(committed, ins)
		first := len(committed) == 1
		mu.Unlock()
		if first {
			close(inside)
			<-release
		}
	}
	first := q.Enqueue(0)
	if !first.lead {
		t.Fatal("the first member does not lead with no commit running")
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if out := q.Await(first, 4, commit); out != 0 {
			t.Errorf("member 0: %d", out)
		}
	})
	<-inside
	// Queued in order (as a stream queues under its own lock), awaited
	// by goroutines of their own.
	const n = 10
	members := make([]*Member[int, int], n)
	for i := range n {
		members[i] = q.Enqueue(i + 1)
		if members[i].lead {
			t.Fatalf("member %d leads while a commit runs", i+1)
		}
	}
	if q.Waiting() != n {
		t.Fatalf("%d waiting, want %d", q.Waiting(), n)
	}
	outs := make([]int, n)
	for i, m := range members {
		wg.Go(func() { outs[i] = q.Await(m, 4, commit) })
	}
	time.Sleep(10 * time.Millisecond) // they block until the commit ends
	close(release)
	wg.Wait()
	for i, out := range outs {
		if out != (i+1)*10 {
			t.Errorf("member %d got %d, want %d", i+1, out, (i+1)*10)
		}
	}
	want := [][]int{{0}, {1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10}}
	if !slices.EqualFunc(committed, want, slices.Equal) {
		t.Errorf("batches %v, want %v", committed, want)
	}
	if q.Waiting() != 0 || q.leading {
		t.Errorf("after: %d waiting, leading %v", q.Waiting(), q.leading)
	}
	// Idle again: the next member leads and commits alone.
	if m := q.Enqueue(11); !m.lead || q.Await(m, 4, commit) != 110 {
		t.Error("a member queued on an idle queue did not commit by itself")
	}
}

// Many callers at once: every member is committed exactly once.
func TestQueueUnderLoad(t *testing.T) {
	var q Queue[int, int]
	seen := make([]int, 2000)
	batches := 0
	commit := func(batch []*Member[int, int]) { // one commit at a time: no lock needed
		batches++
		for _, m := range batch {
			seen[m.In]++
			m.Out = -m.In
		}
	}
	var wg sync.WaitGroup
	for w := range 20 {
		wg.Go(func() {
			for i := w; i < len(seen); i += 20 {
				if out := q.Await(q.Enqueue(i), 0, commit); out != -i {
					t.Errorf("member %d got %d", i, out)
				}
			}
		})
	}
	wg.Wait()
	for i, c := range seen {
		if c != 1 {
			t.Fatalf("member %d committed %d times", i, c)
		}
	}
	t.Logf("%d members in %d batches", len(seen), batches)
}
