package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
)

func main() {
	name := pflag.String("name", "world", "who to greet")
	pflag.Parse()
	fmt.Fprintf(os.Stdout, "hello, %s\n", *name)
}
