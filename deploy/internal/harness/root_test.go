package harness_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/slipway-dev/slipway/deploy/internal/harness"
)

// Root is the module's root from this folder too: it holds deploy/'s base
// and the go.mod of the module.
func TestRootIsTheModules(t *testing.T) {
	root := harness.Root(t)
	for _, f := range []string{"go.mod", "deploy/base/kustomization.yaml", "tools/previous-version"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("Root = %s: %v", root, err)
		}
	}
	if wd, _ := os.Getwd(); filepath.Join(root, "deploy", "internal", "harness") != wd {
		t.Errorf("Root = %s, not three folders above %s", root, wd)
	}
}
