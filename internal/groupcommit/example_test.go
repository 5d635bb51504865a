package groupcommit_test

import (
	"fmt"
	"strings"

	"github.com/slipway-dev/slipway/internal/groupcommit"
)

// Three callers queue work while none commits: the first leads and commits
// in batches of at most two, so its own batch carries the second caller's
// work too, and the third caller, handed the lead, commits its own. Each
// caller gets its own outcome, in the order the work was queued.
func ExampleQueue() {
	var q groupcommit.Queue[string, string]
	a := q.Enqueue("a") // no commit runs: a's caller will lead
	b := q.Enqueue("b")
	c := q.Enqueue("c")
	fmt.Println("waiting:", q.Waiting())

	flushes := 0
	commit := func(batch []*groupcommit.Member[string, string]) {
		flushes++
		var ins []string
		for _, m := range batch {
			ins = append(ins, m.In)
			m.Out = fmt.Sprintf("%s in flush %d", m.In, flushes)
		}
		fmt.Println("flush", flushes, "commits", strings.Join(ins, ", "))
	}
	fmt.Println(q.Await(a, 2, commit))
	fmt.Println(q.Await(b, 2, commit)) // already committed with a's batch
	fmt.Println(q.Await(c, 2, commit)) // handed the lead: commits what waits
	fmt.Println("waiting:", q.Waiting())
	// Output:
	// waiting: 3
	// flush 1 commits a, b
	// a in flush 1
	// b in flush 1
	// flush 2 commits c
	// c in flush 2
	// waiting: 0
}
