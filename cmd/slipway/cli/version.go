package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is set at link time: -ldflags "-X github.com/slipway-dev/slipway/cmd/slipway/cli.version=v1.2.3".
// The Makefile stamps an untagged build v0.0.0-<commit>; a plain go build leaves devel.
var version = "devel"

type versionInfo struct {
	Version   string `json:"version"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	Module    string `json:"module,omitempty"`
	Untagged  bool   `json:"untagged,omitempty"`
}

// NewCmdVersion prints the version.
func NewCmdVersion(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the slipway version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return printVersion(g)
		},
	}
}

// printVersion is what both `slipway version` and `slipway --version` print.
func printVersion(g *globals) error {
	v := versionInfo{Version: version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Module = bi.Main.Path
		if v.Version == "devel" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
	}
	v.Untagged = v.Version == "devel" || strings.HasPrefix(v.Version, "v0.0.0-")
	if g.json() {
		return g.printJSON(v)
	}
	untagged := ""
	if v.Untagged {
		untagged = " (untagged build)"
	}
	_, err := fmt.Fprintf(g.stdout, "slipway %s%s %s %s\n", v.Version, untagged, v.GoVersion, v.Platform)
	return err
}
