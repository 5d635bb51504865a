package cost

import (
	"testing"

	"github.com/slipway-dev/slipway/testharness/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m) // runs the tests, then stops the shared PostgreSQL if one started
}
