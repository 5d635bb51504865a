package apierror

import "sync"

// Repeats keeps a probe that fails the same way every few seconds from
// filling the log: each part's error is logged once, under one id, until
// it changes or clears.
type Repeats struct {
	mu   sync.Mutex
	last map[string]string // part: the error last logged
	ids  map[string]string // part: its id
}

// Tell returns the id part's err is logged under, calling log(id) only
// when err differs from part's last error.
func (r *Repeats) Tell(part string, err error, log func(id string)) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last, r.ids = map[string]string{}, map[string]string{}
	}
	if msg := err.Error(); r.last[part] != msg {
		r.last[part], r.ids[part] = msg, NewID()
		log(r.ids[part])
	}
	return r.ids[part]
}

// Clear forgets part's error: the next one is logged again.
func (r *Repeats) Clear(part string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, part)
}
