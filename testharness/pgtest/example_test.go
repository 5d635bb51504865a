package pgtest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/slipway-dev/slipway/testharness/pgtest"
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

// BinDir looks for initdb, pg_ctl and postgres in $SLIPWAY_PG_BIN (here a
// directory of its own), else in Debian's DefaultBinDir; when one is
// missing it says which, with an error matching ErrNotInstalled that names
// `make deps`, and Start starts nothing. What New skips a test with.
func ExampleBinDir() {
	dir, err := os.MkdirTemp("", "pgtest-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	old, had := os.LookupEnv(pgtest.BinDirEnv)
	os.Setenv(pgtest.BinDirEnv, dir)
	defer func() {
		if had {
			os.Setenv(pgtest.BinDirEnv, old)
		} else {
			os.Unsetenv(pgtest.BinDirEnv)
		}
	}()
	install := func(name string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			log.Fatal(err)
		}
	}

	install("initdb")
	_, err = pgtest.BinDir()
	fmt.Println("not installed:", errors.Is(err, pgtest.ErrNotInstalled))
	fmt.Println(strings.ReplaceAll(err.Error(), dir, "$SLIPWAY_PG_BIN"))
	_, err = pgtest.Start(context.Background(), filepath.Join(dir, "cluster"))
	fmt.Println("start refused:", errors.Is(err, pgtest.ErrNotInstalled))

	install("pg_ctl")
	install("postgres")
	found, err := pgtest.BinDir()
	fmt.Println("found:", found == dir, err)
	// Output:
	// not installed: true
	// PostgreSQL 15 not installed (make deps installs Debian's postgresql): stat $SLIPWAY_PG_BIN/pg_ctl: no such file or directory
	// start refused: true
	// found: true <nil>
}
