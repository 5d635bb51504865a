package need

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true), where what a test
// needs is provided and its absence is a failure, not a skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing skips tb with the reason, or fails it when InCI.
func Missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if InCI() {
		tb.Fatalf("CI=true and this test's needs are not met: "+format, args...)
	}
	tb.Skipf(format, args...)
}

// Binary returns the path of the named program, found on PATH (or the name
// itself when it holds a slash), calling Missing with hint (what installs
// it) when it is not there.
func Binary(tb testing.TB, name, hint string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(tb, "%s is not installed: %s", name, hint)
	}
	return p
}

// Env returns the value of the environment variable name, calling Missing
// with hint (what sets it) when it is empty.
func Env(tb testing.TB, name, hint string) string {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		Missing(tb, "%s is not set: %s", name, hint)
	}
	return v
}

// EnvBinary returns the program the environment variable name points to,
// calling Missing with hint when it is unset or names no executable file.
func EnvBinary(tb testing.TB, name, hint string) string {
	tb.Helper()
	p := Env(tb, name, hint)
	if _, err := exec.LookPath(p); err != nil {
		Missing(tb, "%s=%s: %v: %s", name, p, err, hint)
	}
	return p
}

// Root calls Missing unless the test runs as root, saying why it needs it.
func Root(tb testing.TB, why string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		Missing(tb, "needs root: %s", why)
	}
}

// Err calls Missing with err when it is not nil: for a harness that says
// itself what is absent and how to get it (kubetest.Binary, pgtest.BinDir).
func Err(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		Missing(tb, "%v", err)
	}
}

// Short leaves tb out under go test -short, saying what it needs that the
// fast tier does not start: "a real PostgreSQL", "a real Kubernetes node".
func Short(tb testing.TB, what string) {
	tb.Helper()
	if testing.Short() {
		tb.Skip(Reason(what))
	}
}

// Reason is the message Short skips with.
func Reason(what string) string { return fmt.Sprintf("left out by -short: needs %s", what) }
