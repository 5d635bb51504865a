package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/slipway-dev/slipway/internal/testharness/pgtest"
)

// A test gets a database of its own on the test binary's server.
func ExampleNew() {
	// in a test: func TestX(t *testing.T) { dsn := pgtest.New(t); ... }
	var t *testing.T
	dsn := pgtest.New(t)
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
}
