package seccomp_test

import (
	"fmt"
	"syscall"

	"github.com/slipway-dev/slipway/pkg/isolate/seccomp"
)

// Compile the filter a sandbox without capabilities runs under and ask
// it about a few calls.
func Example() {
	f, err := seccomp.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range []struct {
		name string
		args []uint64
	}{
		{"read", nil},
		{"keyctl", nil},
		{"unshare", []uint64{syscall.CLONE_NEWUSER}},
		{"clone", []uint64{uint64(syscall.SIGCHLD)}},
		{"clone", []uint64{syscall.CLONE_NEWUSER | uint64(syscall.SIGCHLD)}},
		{"clone3", nil},
		{"ptrace", nil},
	} {
		v, err := f.Check(c.name, c.args...)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s %#x: %v\n", c.name, c.args, v)
	}
	fmt.Println(len(f.Program()) == 8*f.Len())
	// Output:
	// read []: allowed
	// keyctl []: refused: operation not permitted
	// unshare [0x10000000]: refused: operation not permitted
	// clone [0x11]: allowed
	// clone [0x10000011]: refused: operation not permitted
	// clone3 []: refused: function not implemented
	// ptrace []: refused: operation not permitted
	// true
}
