package isolate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/isolate"
	"github.com/slipway-dev/slipway/testharness/need"
)

// TestNoUserNamespaces: a sandbox cannot make a user namespace of its own
// (root in it, and the kernel's namespace code as attack surface), and
// each of the two locks holds alone: the seccomp filter (unshare
// refused) and bwrap's --disable-userns (no namespace left to make). The
// unconfined case shows the attack works on this host, so the test can
// fail.
func TestNoUserNamespaces(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		spec    func(*isolate.Spec)
		escapes bool
	}{
		{"default", func(*isolate.Spec) {}, false},
		{"filter only", isolate.WithoutDisableUsernsOnly, false},
		{"disable-userns only", isolate.WithoutSeccompOnly, false},
		{"a user namespace of the sandbox", func(s *isolate.Spec) { s.User = &isolate.User{UID: 1000, GID: 1000} }, false},
		{"unconfined", func(s *isolate.Spec) { s.UnsafeNoSeccomp = true }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := baseSpec(t, "unshare -U cat /proc/self/uid_map")
			tc.spec(&s)
			res, err := isolate.Run(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %q", describe(res), res.Output)
			// The new namespace maps nothing yet: its uid_map is empty.
			escaped := res.ExitCode == 0 && strings.TrimSpace(string(res.Output)) == ""
			if escaped != tc.escapes {
				t.Errorf("unshare -U: %s %q; want escaped %v", describe(res), res.Output, tc.escapes)
			}
		})
	}
}

// TestSeccompFilterLoaded: every process of the sandbox runs under one
// filter (mode 2), including the command's children; a root build step
// with BuildCaps too.
func TestSeccompFilterLoaded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		spec func(*isolate.Spec)
		want string
	}{
		{"default", func(*isolate.Spec) {}, "Seccomp:\t2\nSeccomp_filters:\t1\n"},
		{"build caps", func(s *isolate.Spec) { s.Caps = isolate.BuildCaps() }, "Seccomp:\t2\nSeccomp_filters:\t1\n"},
		{"unconfined", func(s *isolate.Spec) { s.UnsafeNoSeccomp = true }, "Seccomp:\t0\nSeccomp_filters:\t0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := baseSpec(t, "sh -c 'grep ^Seccomp /proc/self/status'")
			tc.spec(&s)
			if tc.name == "build caps" {
				need.Root(t, "capabilities mean something for a root caller only")
			}
			res, err := isolate.Run(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 0 || string(res.Output) != tc.want {
				t.Errorf("%s %q, want %q", describe(res), res.Output, tc.want)
			}
		})
	}
}
