package runtimetest_test

import (
	"testing"

	"github.com/slipway-dev/slipway/testharness/registrytest"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

// A test builds the runner and template images once and makes
// generations of them (compiled, not run: it builds the runner).
func ExampleNew() {
	var t testing.T // in a test: the test's *testing.T
	w := runtimetest.New(&t, registrytest.NewInProcess(&t))
	g1 := w.Generation(&t, "agents", nil, "")
	_ = w.Generation(&t, "agents", g1, w.TemplateWithTests(&t, nil))
}
