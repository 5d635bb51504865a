package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Root is the module's root folder (the one whose go.mod declares
// github.com/slipway-dev/slipway), found upwards from the test's working
// directory, so a test under any folder of deploy/ names the tree's files
// alike.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && isModule(string(b)) {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod of module %s above %s", module, dir)
		}
	}
}

const module = "github.com/slipway-dev/slipway"

// isModule says whether go.mod's text declares this module.
func isModule(gomod string) bool {
	for _, l := range strings.Split(gomod, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "module" {
			return f[1] == module
		}
	}
	return false
}
