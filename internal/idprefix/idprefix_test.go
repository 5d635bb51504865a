package idprefix

import (
	"errors"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	ids := []string{"g-1a4ee8aa", "g-1a4ee8bb", "g-2b0000cc"}
	for _, tc := range []struct {
		prefix, want string
		err          error
		msg          string
	}{
		{"g-2b0000", "g-2b0000cc", nil, ""},
		{"g-1a4ee8aa", "g-1a4ee8aa", nil, ""},
		{"g-1a4ee8", "", ErrAmbiguous, "matches g-1a4ee8aa, g-1a4ee8bb"},
		{"g-ffffff", "", ErrNoMatch, "no generation matches g-ffffff in pool agents"},
		{"g-1a4e", "", ErrTooShort, "at least 6 characters after g-"},
		{"ro-1a4ee8", "", nil, "not a generation id"},
	} {
		got, err := Resolve(tc.prefix, "g-", "generation", "pool agents", ids)
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.prefix, got, tc.want)
		}
		if tc.msg == "" && err != nil {
			t.Errorf("%s: %v", tc.prefix, err)
		}
		if tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg)) {
			t.Errorf("%s: error %v, want it to say %q", tc.prefix, err, tc.msg)
		}
		if tc.err != nil && !errors.Is(err, tc.err) {
			t.Errorf("%s: error %v is not %v", tc.prefix, err, tc.err)
		}
	}
}

func TestKind(t *testing.T) {
	for id, want := range map[string]string{"g-12": "g-", "ro-ab": "ro-", "r-1": "r-", "j-x": "j-", "plain": "", "toolong-1": ""} {
		if got := Kind(id); got != want {
			t.Errorf("Kind(%q) = %q, want %q", id, got, want)
		}
	}
}
