package atomicfile_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/slipway-dev/slipway/internal/atomicfile"
)

func ExampleWrite() {
	dir, _ := os.MkdirTemp("", "atomicfile-")
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "images.lock")
	if err := atomicfile.Write(p, []byte("kind: Lock\n"), 0o644); err != nil {
		panic(err)
	}
	b, _ := os.ReadFile(p)
	fmt.Print(string(b))
	// Output:
	// kind: Lock
}
