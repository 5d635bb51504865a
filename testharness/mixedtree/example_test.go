package mixedtree_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/slipway-dev/slipway/testharness/mixedtree"
)

// Write makes the same tree for the same seed: here 12 files of the built-in
// kinds only, in one directory with its kustomization.
func ExampleWrite() {
	dir, err := os.MkdirTemp("", "mixedtree")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	if err := mixedtree.Write(dir, 12, 42, mixedtree.Docs[:mixedtree.BuiltinDocs]); err != nil {
		panic(err)
	}
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	fmt.Println(n, "files")
	// Output: 13 files
}
