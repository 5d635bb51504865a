package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at link time: -ldflags "-X github.com/slipway-dev/slipway/cmd/slipway/cli.version=v1.2.3".
var version = "devel"

type versionInfo struct {
	Version   string `json:"version"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	Module    string `json:"module,omitempty"`
}

// NewCmdVersion prints the version.
func NewCmdVersion(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the slipway version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := versionInfo{Version: version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			if bi, ok := debug.ReadBuildInfo(); ok {
				v.Module = bi.Main.Path
				if v.Version == "devel" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
					v.Version = bi.Main.Version
				}
			}
			if g.json() {
				return g.printJSON(v)
			}
			_, err := fmt.Fprintf(g.stdout, "slipway %s %s %s\n", v.Version, v.GoVersion, v.Platform)
			return err
		},
	}
}
