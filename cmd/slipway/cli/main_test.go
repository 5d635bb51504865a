package cli

import (
	"os"
	"testing"

	"github.com/slipway-dev/slipway/testharness/pgtest"
)

// envRunMain makes the test binary behave as the slipway command, so that
// tests can run it as a separate process (and kill it).
const envRunMain = "SLIPWAY_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	pgtest.Main(m) // runs the tests, then stops the shared PostgreSQL if one started
}
