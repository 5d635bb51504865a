// Command stamp prints version.Get(): TestLinkStamp builds it with release flags.
package main

import (
	"fmt"

	"github.com/slipway-dev/slipway/internal/version"
)

func main() { fmt.Print(version.Get().String()) }
