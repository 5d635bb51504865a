package apierror

import (
	"errors"
	"fmt"
	"regexp"
	"testing"
)

func TestDecide(t *testing.T) {
	detail := errors.New("open /srv/state/runs.db: permission denied")
	for _, tc := range []struct {
		err      error
		tellable bool
		want     string // regexp
	}{
		{detail, true, `^open /srv/state/runs.db: permission denied$`},
		{detail, false, `^internal error \(error id e-[0-9a-f]{12}\)$`},
		{Public("this runtime follows no config repository", nil), false, `^this runtime follows no config repository$`},
		{fmt.Errorf("x: %w", Public("the run store is unavailable", detail)), false, `^the run store is unavailable \(error id e-[0-9a-f]{12}\)$`},
	} {
		a := Decide(tc.err, tc.tellable)
		if !regexp.MustCompile(tc.want).MatchString(a.Reason) || a.Hidden() != (a.ID != "") {
			t.Errorf("%v tellable=%v: %+v", tc.err, tc.tellable, a)
		}
	}
	if a, b := NewID(), NewID(); a == b {
		t.Fatalf("two error ids alike: %s", a)
	}
}

// A repeated error is logged once under one id; a new or returning one
// again.
func TestRepeatsLogsOnce(t *testing.T) {
	var r Repeats
	var logged []string
	log := func(id string) { logged = append(logged, id) }
	a := r.Tell("database", errors.New("down"), log)
	if b := r.Tell("database", errors.New("down"), log); b != a || len(logged) != 1 {
		t.Fatalf("a repeat: %s %s %v", a, b, logged)
	}
	if c := r.Tell("database", errors.New("refused"), log); c == a || len(logged) != 2 {
		t.Fatalf("a new error: %v", logged)
	}
	r.Clear("database")
	r.Tell("database", errors.New("refused"), log)
	if len(logged) != 3 {
		t.Fatalf("after a clear: %v", logged)
	}
}
