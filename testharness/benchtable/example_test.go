package benchtable_test

import (
	"os"
	"strings"

	"github.com/slipway-dev/slipway/testharness/benchtable"
)

// The rows a run of make bench collected (here two BENCHROW lines of a
// benchmark's output) become one table.
func ExampleMarkdown() {
	out := `BENCHROW {"bench":"B1","what":"pin 500 refs","slipway":"1.00 s","peer":"kbld 4.00 s","ratio":0.25,"target":"<= 0.2x kbld","met":false,"load":1.5,"steal":0.5,"cpus":2}
BENCHROW {"bench":"B8a","what":"submit","slipway":"2 s","peer":"River 1.6 s","ratio":1.25,"target":"<= 1.5x","met":true,"settings":"both 16 connections","load":0.75,"steal":-1,"cpus":2}
BENCHROW {"bench":"B7","what":"query","slipway":"27 ms","noPeer":true,"target":"< 100 ms","met":true,"load":0.5,"steal":0,"cpus":2}`
	rows, err := benchtable.Read(strings.NewReader(out))
	if err != nil {
		panic(err)
	}
	benchtable.Markdown(os.Stdout, rows)
	// Output:
	// | benchmark | what | Slipway | peer | ratio | target | met | load (1 min) / steal |
	// |---|---|---|---|---|---|---|---|
	// | B1 | pin 500 refs | 1.00 s | kbld 4.00 s | 0.25x | <= 0.2x kbld | missed | 1.50 on 2 CPUs, steal 0.5% |
	// | B8a | submit | 2 s | River 1.6 s (settings: both 16 connections) | 1.25x | <= 1.5x | met | 0.75 on 2 CPUs, steal n/a |
	// | B7 | query | 27 ms | - | - | < 100 ms | met | 0.50 on 2 CPUs, steal 0.0% |
}
