// Command liar is a test runner that claims a digest it does not have:
//
//	liar CLAIM-FILE serve --listen-fd 0 --generation G --sandbox ID --workdir W
//
// It answers identity requests with the digest written in CLAIM-FILE.
//
// It exists only for pkg/execution/sandbox/local's tests, which build it, to show
// that the backend checks the process behind the socket itself.
package main
