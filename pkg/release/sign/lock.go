package sign

import (
	"sync"
)

// The ".sig" and ".att" tags are read, appended to and written back. Two
// writers of the same tag racing in this process would lose one entry, so
// every writer holds the tag's lock from its read to its read-back check.
// Writers in other processes are covered by the read-back check instead:
// a signer that does not find its own entry after writing appends it again
// (see appendVerified).
var tags = &keyedMutex{held: map[string]*refMutex{}}

type refMutex struct {
	sync.Mutex
	refs int
}

// keyedMutex is a mutex per key that forgets keys nobody holds, so a
// long-running process signing many digests does not grow without bound.
type keyedMutex struct {
	mu   sync.Mutex
	held map[string]*refMutex
}

// lock locks key and returns its unlock function.
func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	m := k.held[key]
	if m == nil {
		m = &refMutex{}
		k.held[key] = m
	}
	m.refs++
	k.mu.Unlock()

	m.Lock()
	return func() {
		m.Unlock()
		k.mu.Lock()
		m.refs--
		if m.refs == 0 {
			delete(k.held, key)
		}
		k.mu.Unlock()
	}
}
