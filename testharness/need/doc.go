// Package need is how a test says what it needs from the machine: a binary, an
// environment variable, root, or a real server that -short leaves out.
//
// A missing binary, variable or privilege skips the test on a developer's
// machine, naming what to install or run, and fails it when the environment
// variable CI is "true": CI (.ci/run) provides everything, so a skip there
// would hide a test that never ran. Short leaves out, under go test -short,
// a test that needs a real server that cannot start in-process.
//
// It is not for skips that depend on what the host can do (cgroup v2 only
// paths, a file system without user xattrs): those stay plain t.Skip calls
// with their reason, in CI too.
package need
