// Command print reads the rows the benchmarks of one `make bench` run
// appended to $BENCH_OUT (package testharness/benchtable) and prints them as
// one Markdown table, with the date and the command. It exits non-zero when
// the file holds no row, so that a run whose benchmarks all skipped does
// not print an empty table as a result.
//
//	go run ./testharness/benchtable/print FILE
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/slipway-dev/slipway/testharness/benchtable"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: print FILE (the BENCH_OUT of a make bench run)")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "print: %v\n", err)
		os.Exit(1)
	}
	defer f.Close()
	rows, err := benchtable.Read(f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "print: %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	if len(rows) == 0 {
		fmt.Fprintf(os.Stderr, "print: %s: no benchmark row (did every benchmark skip?)\n", os.Args[1])
		os.Exit(1)
	}
	mode := "make bench"
	if os.Getenv("BENCH_SMOKE") != "" {
		mode = "BENCH_SMOKE=1 make bench (smoke sizes: not a result)"
	}
	fmt.Printf("\n%s, %s:\n\n", mode, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	if err := benchtable.Markdown(os.Stdout, rows); err != nil {
		fmt.Fprintf(os.Stderr, "print: %v\n", err)
		os.Exit(1)
	}
}
